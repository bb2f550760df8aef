"""The investigation graph (LangGraph's template layout): state, graph, tools, prompts, configuration, the
checkpointer, and the checks every finding passes (verify, grounding) before the write-up.
"""
