"""What happens, in Slack terms: investigate a complaint, decide on a note, show a case's message, the
Home tab, the slash command, the chores. Listeners (and the CLI) call these; these call presenters, the
store and the packages below bot/."""
