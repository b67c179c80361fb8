"""Web UI login for Locust's `--web-login`: one username and password from the environment.

Locust 2.47 dropped basic auth (`--web-auth` now errors) for `--web-login`, which shows a login
page but leaves checking the password to the locustfile. Add this file to `-f` and set
SM_LOCUST_WEB_USERNAME and SM_LOCUST_WEB_PASSWORD (and optionally FLASK_SECRET_KEY so sessions
survive restarts); without `--web-login` it does nothing. The password is compared in constant
time and never logged. It protects the UI from casual use only: traffic is plain HTTP unless
Locust runs with --tls-cert/--tls-key.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets

from locust import events

log = logging.getLogger("sm_locust")


def credentials_match(username: str, password: str, expected_user: str, expected_password: str) -> bool:
    """Constant-time check of both fields; an unset expected password never matches."""
    if not expected_user or not expected_password:
        return False
    user_ok = hmac.compare_digest(username.encode(), expected_user.encode())
    password_ok = hmac.compare_digest(password.encode(), expected_password.encode())
    return user_ok and password_ok


@events.init.add_listener
def _web_login(environment, **_kw) -> None:
    web_ui = environment.web_ui
    if web_ui is None or not getattr(environment.parsed_options, "web_login", False):
        return
    from flask import Blueprint, redirect, request, session, url_for
    from flask_login import UserMixin, login_user

    expected_user = os.environ.get("SM_LOCUST_WEB_USERNAME", "")
    expected_password = os.environ.get("SM_LOCUST_WEB_PASSWORD", "")
    if not expected_user or not expected_password:
        log.error("sm-locust: --web-login needs SM_LOCUST_WEB_USERNAME and SM_LOCUST_WEB_PASSWORD; nobody can log in")

    class WebUser(UserMixin):
        def __init__(self, username: str):
            self.id = username

    base = environment.parsed_options.web_base_path or ""
    web_ui.app.config["SECRET_KEY"] = os.environ.get("FLASK_SECRET_KEY") or secrets.token_hex(32)
    web_ui.login_manager.user_loader(lambda user_id: WebUser(user_id) if user_id == expected_user else None)
    web_ui.auth_args = {"username_password_callback": f"{base}/login_submit"}
    blueprint = Blueprint("sm_locust_login", __name__, url_prefix=base)

    @blueprint.route("/login_submit", methods=["POST"])
    def login_submit():
        username = request.form.get("username", "")
        password = request.form.get("password", "")
        if credentials_match(username, password, expected_user, expected_password):
            login_user(WebUser(username))
            return redirect(url_for("locust.index"))
        session["auth_error"] = "Invalid username or password"
        return redirect(url_for("locust.login"))

    web_ui.app.register_blueprint(blueprint)
