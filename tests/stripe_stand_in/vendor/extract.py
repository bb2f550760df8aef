"""Re-extract the vendored subset of Stripe's published API description (run by hand, not by the tests).

    python tests/stripe_stand_in/vendor/extract.py OPENAPI_GIT_DIR STRIPE_PACKAGE_DIR

OPENAPI_GIT_DIR is a clone of github.com/stripe/openapi (a bare git directory will do); the fixtures are read
at FIXTURES_COMMIT, the commit "Update OpenAPI for 2026-06-24.dahlia", the API version the pinned SDK speaks.
STRIPE_PACKAGE_DIR is the pinned SDK's package directory
(`python -c "import stripe; print(stripe.__path__[0])"`).

Why the operations come from the SDK: openapi/spec3.json at that commit is over 4 MiB, more than the public
source store this project can read holds, so the operations' methods, paths and parameters are read from the
pinned SDK's `params/` and `*_service.py` modules, which Stripe generates from that same spec (each says
"File generated from our OpenAPI spec"). Only data is written: names, types and enums, no SDK code.
"""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

FIXTURES_COMMIT = "a2de9917ac9c7be3ba11abd5151b5c2df3add59e"
API_VERSION = "2026-06-24.dahlia"
HERE = Path(__file__).parent

# (operation id, service module, service method) for every call BillSleuth makes.
OPERATIONS = [
    ("credit_notes.create", "_credit_note_service", "create"),
    ("credit_notes.preview", "_credit_note_service", "preview"),
    ("credit_notes.retrieve", "_credit_note_service", "retrieve"),
    ("credit_notes.list", "_credit_note_service", "list"),
    ("credit_notes.void", "_credit_note_service", "void_credit_note"),
    ("credit_notes.lines.list", "_credit_note_line_item_service", "list"),
    ("invoices.list", "_invoice_service", "list"),
    ("invoices.retrieve", "_invoice_service", "retrieve"),
    ("invoices.lines.list", "_invoice_line_item_service", "list"),
    ("customers.list", "_customer_service", "list"),
    ("customers.retrieve", "_customer_service", "retrieve"),
    ("prices.list", "_price_service", "list"),
    ("prices.retrieve", "_price_service", "retrieve"),
    ("products.list", "_product_service", "list"),
    ("products.retrieve", "_product_service", "retrieve"),
    ("coupons.list", "_coupon_service", "list"),
    ("coupons.retrieve", "_coupon_service", "retrieve"),
    ("tax_rates.list", "_tax_rate_service", "list"),
    ("tax_rates.retrieve", "_tax_rate_service", "retrieve"),
    ("subscriptions.list", "_subscription_service", "list"),
    ("subscriptions.retrieve", "_subscription_service", "retrieve"),
    ("charges.list", "_charge_service", "list"),
    ("charges.retrieve", "_charge_service", "retrieve"),
    ("payment_intents.list", "_payment_intent_service", "list"),
    ("payment_intents.retrieve", "_payment_intent_service", "retrieve"),
    ("refunds.list", "_refund_service", "list"),
    ("refunds.retrieve", "_refund_service", "retrieve"),
    ("events.list", "_event_service", "list"),
    ("events.retrieve", "_event_service", "retrieve"),
]

# The fixtures' resources the stand-in shapes its objects on.
RESOURCES = [
    "charge",
    "coupon",
    "credit_note",
    "credit_note_line_item",
    "customer",
    "discount",
    "event",
    "invoice",
    "line_item",
    "payment_intent",
    "price",
    "product",
    "refund",
    "subscription",
    "subscription_item",
    "tax_rate",
]


def _service_call(module: ast.Module, method_name: str) -> tuple[str, str, str | None]:
    """(HTTP method, path template, params TypedDict name) of one service method."""
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef) and node.name == method_name:
            params_type = None
            for argument in node.args.args:
                if argument.arg == "params" and argument.annotation is not None:
                    params_type = re.search(r"\w+Params", ast.unparse(argument.annotation)).group(0)
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "_request":
                    http_method = call.args[0].value
                    path_node = call.args[1]
                    if isinstance(path_node, ast.Call):  # "/v1/x/{id}".format(id=…)
                        path_node = path_node.func.value
                    return http_method.upper(), path_node.value, params_type
    raise LookupError(method_name)


def _typed_dicts(package: Path) -> dict[str, dict[str, ast.expr]]:
    """Every TypedDict of the params modules: class name → {field: annotation}."""
    classes: dict[str, dict[str, ast.expr]] = {}
    for path in sorted((package / "params").glob("_*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = {
                    statement.target.id: statement.annotation
                    for statement in node.body
                    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
                }
    return classes


def _schema(node: ast.expr, classes: dict[str, dict[str, ast.expr]], depth: int = 0) -> dict[str, Any]:
    """A small JSON schema of a parameter: type, enum, properties or items (nested TypedDicts inlined)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted forward reference
        return _schema(ast.parse(node.value, mode="eval").body, classes, depth)
    if isinstance(node, ast.BinOp):  # A | B
        return {"anyOf": [_schema(node.left, classes, depth), _schema(node.right, classes, depth)]}
    if isinstance(node, ast.Subscript):
        wrapper = ast.unparse(node.value)
        inner = node.slice
        if wrapper in ("NotRequired", "Optional", "Required"):
            return _schema(inner, classes, depth)
        if wrapper == "Literal":
            values = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            return {"enum": [value.value for value in values]}
        if wrapper == "List":
            return {"type": "array", "items": _schema(inner, classes, depth)}
        return {"type": "object", "additionalProperties": True}  # Dict[str, str], UntypedStripeObject[str]
    name = ast.unparse(node)
    if name in classes and depth < 4:
        fields = classes[name]
        return {
            "type": "object",
            "properties": {key: _schema(value, classes, depth + 1) for key, value in sorted(fields.items())},
        }
    return {"type": {"int": "integer", "str": "string", "bool": "boolean"}.get(name, "string")}


def extract_operations(package: Path) -> dict[str, Any]:
    classes = _typed_dicts(package)
    operations = {}
    for operation_id, module_name, method_name in OPERATIONS:
        module = ast.parse((package / f"{module_name}.py").read_text())
        http_method, path, params_type = _service_call(module, method_name)
        fields = classes.get(params_type or "", {})
        operations[operation_id] = {
            "method": http_method,
            "path": path,
            "parameters": {name: _schema(field, classes) for name, field in sorted(fields.items())},
        }
    return operations


def extract_fixtures(openapi_git_dir: Path) -> dict[str, Any]:
    text = subprocess.run(
        ["git", "-C", str(openapi_git_dir), "show", f"{FIXTURES_COMMIT}:openapi/fixtures3.json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    resources = json.loads(text)["resources"]
    return {name: resources[name] for name in RESOURCES}


def main() -> None:
    openapi_git_dir, package = Path(sys.argv[1]), Path(sys.argv[2])
    source = {
        "api_version": API_VERSION,
        "fixtures": f"github.com/stripe/openapi {FIXTURES_COMMIT} openapi/fixtures3.json",
        "operations": "stripe-python 15.3.1 params/ and *_service.py (generated from the same spec)",
    }
    fixtures = {"source": source, "resources": extract_fixtures(openapi_git_dir)}
    operations = {"source": source, "operations": extract_operations(package)}
    (HERE / "fixtures.json").write_text(json.dumps(fixtures, indent=1, sort_keys=True) + "\n")
    (HERE / "operations.json").write_text(json.dumps(operations, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
