"""Review by people: duplicate proposals and conflict flags."""
