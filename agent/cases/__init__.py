"""The case lifecycle: reading a complaint (intake, which customer), opening a case, deciding on its credit
note, rounds, settling, recovery and the periodic sweep.
"""
