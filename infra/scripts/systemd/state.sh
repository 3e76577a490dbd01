# The unit .Unit's state: prints whether it is enabled (is-enabled's
# word: enabled, disabled, ...), then whether it runs (is-active's:
# active, inactive, failed, ...), one a line. The exit code is
# is-active's.
unit={{q .Unit}}
systemctl is-enabled "$unit" || true
systemctl is-active "$unit"
