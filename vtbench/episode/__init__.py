"""Research episodes: the workspace, the runner and the typed episode record."""
