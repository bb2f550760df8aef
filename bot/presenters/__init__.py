"""Read models, one per screen, from the database to the frozen view models bot/cards draws: the approver's
view of a credit note (approver.py: the card, `show --json`, `show`), a case's message (cases.py), App
Home (home.py), and what they share (notes.py). Reading is done here, drawing in bot/cards, talking to
Slack in bot/flows."""
