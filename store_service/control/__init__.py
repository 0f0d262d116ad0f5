"""The control plane: workspaces, members, credentials, authentication, member removal."""
