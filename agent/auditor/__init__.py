"""The deterministic auditor: one detector per root cause, pure; run over the database for one customer or
streamed for all, and the findings sweep that records what it finds. Knows nothing of the model.
"""
