"""The Streamlit page's helpers (the page itself is the top-level ``app.py``): uploads into a private
folder (`uploads`), the page's work as cached library calls keyed by content (`work`), tables
(`tables`), the downloads (`report`), the Tune tab (`tuning`), the error boundary (`boundary`),
getting ready for the first plot while the uploader waits (`warm`) and ``workbench ui`` (`cli`).
Widgets live in ``app.py`` only; everything here is testable without a browser."""
