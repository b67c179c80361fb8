"""The options a run takes: declared once (`OptionSpec`), read from the command line, the
environment, locust.conf, the web UI and the Python API, parsed into typed settings.

    options.py   `OptionSpec`, the parsers, the option providers, the endpoint's settings
"""
