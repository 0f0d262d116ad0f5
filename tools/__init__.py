"""Developer tools (code generation); not shipped as part of the services."""
