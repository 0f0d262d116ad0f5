"""Who may read and write what: readability in SQL, the provenance walk, the expiry gate's rule, member write locks."""
