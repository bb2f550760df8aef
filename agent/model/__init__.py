"""The model: the LLM investigator, this process's OpenAI-compatible clients, what each response cost and
the monthly budget.
"""
