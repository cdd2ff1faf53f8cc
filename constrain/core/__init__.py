"""What both backends share and neither owns (issue #12's backend-neutral core, begun here)."""
