"""The Content-Security-Policy (django-csp): nothing in it comes from the environment.

Enforced, not report-only. Scripts and styles come only from our own static files: no inline
<script>, no on*= handlers or javascript: URLs, no style="" attributes, no eval (htmx is told
not to use it, nor to inject its indicator <style>; see base.html). Behaviour lives in
static/controlplane/app.js, sizes in CSS classes or SVG attributes. tests/security/test_csp.py
checks every page and, in Chromium, that nothing is reported as a violation.
"""

from __future__ import annotations

CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],  # data: for icons inlined in third-party CSS (Swagger UI)
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}
