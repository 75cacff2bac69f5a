"""What this build keeps beside a store's logs: tables in its database (``side_tables``)
and small files replaced durably (``replace_file``)."""
