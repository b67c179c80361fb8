"""What the default locustfile does to Locust's web UI (not a locustfile itself).

Locust's `POST /swarm` and `POST /user` can set any parsed option or User attribute, so options
that load code or route credentials (`--payload`, `--endpoint-url`, `--region`, `--aws-profile`,
`host`) are declared `web_ui=False`, and `protect` refuses any request changing an option the form
does not show, checks the shown numbers and booleans as the command line does and bounds users by
`MAX_USERS`. `FORM_SCRIPT` groups the sm-locust fields under headings with readable labels
(`form_layout`, pure); the start form hides Locust's host warning and field (`HIDE_HOST_FIELD`) and
leaves `OpenLoopUser` out of the class picker.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from locust.argument_parser import ui_extra_args_dict
from locust.runners import MasterRunner

from flask import jsonify, request
from werkzeug.datastructures import ImmutableMultiDict

from sm_locust.config.options import (
    GROUPS,
    all_option_specs,
    grouped_specs,
    locust_values,
    option_help,
    option_label,
)
from sm_locust.errors import UsageError
from sm_locust.shapes import SHAPES
from sm_locust.shapes.base import SmLocustShape
from sm_locust.users.openloop import OpenLoopUser
from sm_locust.util.numbers import MAX_USERS, check_number

# Fields of Locust's own start form (its /swarm handler reads them itself).
LOCUST_FORM_FIELDS = frozenset({"user_count", "spawn_rate", "host", "user_classes", "shape_class", "run_time",
                                "profile"})
# What the class picker's "edit user" dialog may set on a User class.
USER_FIELDS = frozenset({"user_class_name", "weight", "fixed_count", "tasks", "host"})


# Locust's start form (a React page) renders a Host text field whatever the template says. The users
# need an endpoint (--endpoint-name), and the host may not be changed from the UI anyway (`protect`
# refuses it): the field's form control is hidden as soon as the page draws it (its input stays, so the
# form still sends the host Locust was started with).
HIDE_HOST_FIELD = ("<script>/* sm-locust: the users need an endpoint, not a host */ new MutationObserver(function () {"
                   "document.querySelectorAll('input[name=\"host\"]').forEach(function (input) {"
                   "var field = input.closest('.MuiFormControl-root') || input.parentElement;"
                   "if (field.style.display !== 'none') { field.style.display = 'none'; } }); })"
                   ".observe(document, {childList: true, subtree: true});</script>")


def form_layout(shown: Iterable[str]) -> list[dict[str, Any]]:
    """The sm-locust fields of the start form in groups, GROUPS' order: [{"key", "title", "fields":
    [{"name", "label", "help"}]}], the options the form shows (`shown`: its extra options) only."""
    shown = set(shown)
    layout = []
    for key, specs in grouped_specs():
        fields = [{"name": spec.dest, "label": option_label(spec), "help": option_help(spec)}
                  for spec in specs if spec.web_ui and spec.dest in shown]
        if fields:
            layout.append({"key": key, "title": GROUPS[key], "fields": fields})
    return layout


def shape_names(environment) -> dict[str, str]:
    """Shape class name -> its sm-locust shape name, for the shapes the UI can pick (or runs)."""
    classes = dict(environment.available_shape_classes or {})
    if environment.shape_class is not None:
        classes[type(environment.shape_class).__name__] = environment.shape_class
    found = {}
    for name, shape in classes.items():
        shape_class = shape if isinstance(shape, type) else type(shape)
        if issubclass(shape_class, SmLocustShape) and shape_class.shape_name:
            found[name] = shape_class.shape_name
    return found


def current_shape(environment) -> str | None:
    shape = environment.shape_class
    return getattr(type(shape), "shape_name", None) if shape is not None else None


def form_script(layout: list[dict[str, Any]], shapes: Mapping[str, str], current: str | None) -> str:
    """The page's data (JSON; `<` escaped so no text can close the script) and FORM_SCRIPT."""
    data = json.dumps({"groups": layout, "shapes": dict(shapes), "current": current,
                       "shapeGroups": SHAPES.names()}).replace("<", "\\u003c")
    return f"<script>window.smLocustForm = {data};</script>{FORM_SCRIPT}"


# Groups the start form's "Custom parameters" by `window.smLocustForm` (form_layout): a heading per
# group; with a shape picked (again whenever the picker changes) its own group first, then the
# settings every shape reads, the other groups, and the other shapes' groups last; a readable label
# and the full help under each field; with an sm-locust shape picked, what it does not read is hidden:
# Locust's "Number of users" (every shape sets its own), the ramp-up (only the step shape reads it)
# and the other shapes' groups. Idempotent: it runs on every change of the page
# (React draws the form late, and again) and does nothing until the shape picked changes.
FORM_SCRIPT = """<style>
.sm-locust-group{margin:18px 0 2px;padding-top:10px;border-top:1px solid rgba(128,128,128,.4);font-weight:600}
.sm-locust-group small{font-weight:400;opacity:.7;margin-left:.5em}
.sm-locust-help{margin:3px 2px 0;font-size:.8rem;line-height:1.3;opacity:.75;white-space:normal}
</style><script>/* sm-locust: the options in groups, with readable labels and their full help */
(function () {
  var form = window.smLocustForm;
  if (!form || !form.groups.length) { return; }
  var applied = null;
  var CONTROLS = 'input[name], select[name], textarea[name]';
  function camel(name) { return name.replace(/_([a-z0-9])/g, function (m, c) { return c.toUpperCase(); }); }
  function box(control) {
    var el = control;
    while (el.parentElement && el.parentElement.querySelectorAll(CONTROLS).length === 1) { el = el.parentElement; }
    return el;
  }
  function field(container, name) {
    var scope = container || document, wanted = [name, camel(name)];
    for (var i = 0; i < wanted.length; i++) {
      var control = scope.querySelector('[name="' + wanted[i] + '"]');
      if (control) { return box(control); }
    }
    return null;
  }
  function chosen() {
    var picker = document.querySelector('[name="shapeClass"], [name="shape_class"]');
    return (picker ? form.shapes[picker.value] : form.current) || null;
  }
  function order(shape) {
    var keys = form.groups.map(function (g) { return g.key; });
    if (!shape) { return keys; }
    var first = [shape, 'shape'].filter(function (k) { return keys.indexOf(k) >= 0; });
    var rest = keys.filter(function (k) { return first.indexOf(k) < 0; });
    var others = rest.filter(function (k) { return form.shapeGroups.indexOf(k) >= 0; });
    return first.concat(rest.filter(function (k) { return others.indexOf(k) < 0; }), others);
  }
  function decorate(el, f) {
    if (el.getAttribute('data-sm-locust-field')) { return; }
    el.setAttribute('data-sm-locust-field', f.name);
    var label = el.querySelector('label, .MuiFormControlLabel-label');
    if (label) { label.textContent = f.label; }
    var notch = el.querySelector('fieldset legend span');  /* the outline's gap is sized by this text */
    if (notch) { notch.textContent = f.label; }
    var help = document.createElement('p');
    help.className = 'sm-locust-help';
    help.textContent = f.help;
    el.appendChild(help);
  }
  function show(el, visible) {
    if (!el) { return; }
    var wanted = visible ? '' : 'none';
    if (el.style.display !== wanted) { el.style.display = wanted; }
  }
  function fit(container, shape) {  /* what the shape picked does not read: hidden (its value still sent) */
    show(field(null, 'userCount'), !shape);
    show(field(null, 'spawnRate'), !shape || shape === 'step');
    if (!container) { return; }
    form.groups.forEach(function (group) {
      var applies = !shape || form.shapeGroups.indexOf(group.key) < 0 || group.key === shape;
      show(container.querySelector('[data-sm-locust-group="' + group.key + '"]'), applies);
      group.fields.forEach(function (f) {
        show(container.querySelector('[data-sm-locust-field="' + f.name + '"]'), applies);
      });
    });
  }
  function apply() {
    fit(null, chosen());
    var start = field(null, form.groups[0].fields[0].name);
    if (!start || !start.parentElement) { return; }
    var container = start.parentElement, shape = chosen();
    fit(container, shape);
    if (applied === shape && container.getAttribute('data-sm-locust')) { return; }
    applied = shape;
    container.setAttribute('data-sm-locust', 'grouped');
    order(shape).forEach(function (key) {
      var group = form.groups.filter(function (g) { return g.key === key; })[0];
      var heading = container.querySelector('[data-sm-locust-group="' + key + '"]');
      if (!heading) {
        heading = document.createElement('div');
        heading.className = 'sm-locust-group';
        heading.setAttribute('data-sm-locust-group', key);
        heading.appendChild(document.createTextNode(group.title));
        heading.appendChild(document.createElement('small'));
      }
      heading.lastChild.textContent = key === shape ? 'the shape picked' : '';
      container.appendChild(heading);
      group.fields.forEach(function (f) {
        var el = field(container, f.name);
        if (el) { decorate(el, f); container.appendChild(el); }
      });
    });
    fit(container, shape);
  }
  var pending = false;
  function schedule() {
    if (pending) { return; }
    pending = true;
    window.requestAnimationFrame(function () { pending = false; apply(); });
  }
  new MutationObserver(schedule).observe(document, {childList: true, subtree: true, attributes: true,
                                                    attributeFilter: ['value']});
  document.addEventListener('click', schedule, true);
  document.addEventListener('change', schedule, true);
})();
</script>"""


def refused_fields(form: Iterable[str], parsed: Mapping[str, object], shown: Iterable[str]) -> list[str]:
    """Form fields that would change a parsed option the UI does not show (pure: for tests)."""
    shown = set(shown) | LOCUST_FORM_FIELDS
    return sorted({key for key in form if key in parsed and key not in shown})


def check_form_values(form: Mapping[str, str], current: Mapping[str, object] | None = None) -> None:
    """A UsageError for a shown sm-locust option value that the command line would refuse (its
    OptionSpec: type, range, choices), or a changed value its option's `web_check` refuses (a traffic
    mix naming a file, say); `current`: the parsed options, whose values the form may send back
    unchanged."""
    for spec in all_option_specs():
        if not spec.web_ui or spec.dest not in form:
            continue
        value = form[spec.dest]
        if spec.web_check is not None and value and value != str((current or {}).get(spec.dest) or ""):
            spec.web_check(value)
        spec.parse(value)


def form_options(parsed: Mapping[str, object], form: Mapping[str, str], shown: Iterable[str]) -> dict[str, object]:
    """Locust's parsed options (`locust_values`) with the shown options the form sends (its text, as the
    command line's would be) in place: what the swarm will run with, for the start-up check."""
    return {**parsed, **{name: form[name] for name in set(shown) & set(form)}}


def _refusal(fields: list[str]) -> str:
    flags = ", ".join("--" + f.replace("_", "-") if f != "host" else "host" for f in fields)
    return (f"{flags} cannot be changed from the web UI (code loading and where the signed requests go stay on the "
            "command line); restart Locust with the value you want")


def is_open_loop_class(cls: type) -> bool:
    return isinstance(cls, type) and issubclass(cls, OpenLoopUser)


def protect(environment, web_ui, check: Callable[[Any], object] | None = None) -> None:
    """Register the checks above on the web UI's Flask app, and trim its start form. `check(parsed)`:
    the command line's start-up check (endpoint name, headers, payload options and their bounds), run
    on the options the form would start the swarm with; its UsageError refuses the swarm."""
    def refuse(message: str):
        return jsonify({"success": False, "message": message, "host": environment.host})

    @web_ui.app.before_request
    def _check_request():
        if request.method != "POST":
            return None
        endpoint = (request.endpoint or "").rpartition(".")[2]
        if endpoint == "swarm":
            return _check_swarm()
        if endpoint == "update_user":
            return _check_user()
        return None

    def _check_swarm():
        form = request.form
        parsed = locust_values(environment.parsed_options)
        refused = refused_fields(form.keys(), parsed, ui_extra_args_dict())
        if "host" in form and (form.get("host") or "") != (environment.host or ""):
            refused = sorted({*refused, "host"})
        if refused:
            return refuse(_refusal(refused))
        try:
            check_form_values(form.to_dict(), parsed)
            if check is not None and environment.parsed_options is not None:
                check(form_options(parsed, form.to_dict(), ui_extra_args_dict()))
            if "user_count" in form and not isinstance(environment.runner, MasterRunner):  # workers share a master's
                check_number(form["user_count"], "Number of users", int, minimum=0, maximum=MAX_USERS)
        except UsageError as exc:
            return refuse(str(exc))
        _add_open_loop_classes(form)
        return None

    def _add_open_loop_classes(form) -> None:
        """Picking an sm-locust shape brings the open-loop classes the picker hides."""
        picked = form.getlist("user_classes")
        shape = (environment.available_shape_classes or {}).get(form.get("shape_class", "Default"))
        shape_class = shape if isinstance(shape, type) else type(shape)
        if not picked or not issubclass(shape_class, SmLocustShape):
            return
        hidden = [name for name, cls in (environment.available_user_classes or {}).items()
                  if is_open_loop_class(cls) and name not in picked]
        if hidden:
            items = [(k, v) for k, values in form.lists() for v in values] + [("user_classes", n) for n in hidden]
            request.form = ImmutableMultiDict(items)

    def _check_user():
        try:  # the raw body, whatever its Content-Type (cached: Locust's handler reads it again)
            settings = json.loads(request.get_data(cache=True) or b"{}")
        except ValueError:
            return refuse("not a JSON object"), 400
        if not isinstance(settings, dict):
            return refuse("not a JSON object"), 400
        cls = (environment.available_user_classes or {}).get(settings.get("user_class_name"))
        refused = sorted(k for k in settings if k not in USER_FIELDS)
        if "host" in settings and cls is not None and (settings["host"] or None) != (cls.host or None):
            refused.append("host")
        if refused:
            return refuse(f"{', '.join(refused)} cannot be changed from the web UI; "
                          "only weight, fixed_count and tasks"), 400
        return None

    original = web_ui.update_template_args

    def update_template_args() -> None:
        original()
        args = web_ui.template_args
        args["missing_host_warning"] = False  # the users need an endpoint (--endpoint-name), not a host
        args["override_host_warning"] = False
        classes = environment.available_user_classes or {}
        hidden = {name for name, cls in classes.items() if is_open_loop_class(cls)}
        if hidden and args.get("available_user_classes"):
            args["available_user_classes"] = [n for n in args["available_user_classes"] if n not in hidden]
            args["users"] = {n: u for n, u in (args.get("users") or {}).items() if n not in hidden}

    web_ui.update_template_args = update_template_args

    @web_ui.app.after_request
    def _start_form(response):
        """Locust's start form always shows a Host field (its page has no switch for it): hidden here;
        and the sm-locust options grouped (FORM_SCRIPT)."""
        if request.path == "/" and response.mimetype == "text/html" and not response.direct_passthrough:
            page = response.get_data(as_text=True)
            if "</head>" in page:
                layout = form_layout(ui_extra_args_dict())
                script = form_script(layout, shape_names(environment), current_shape(environment))
                response.set_data(page.replace("</head>", HIDE_HOST_FIELD + script + "</head>", 1))
        return response
