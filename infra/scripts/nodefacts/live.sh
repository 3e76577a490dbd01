# Reads a control-plane node's configuration (nodefacts/probe) and every
# certificate's end of validity (nodefacts/expiry) in one session.
# Read-only.
{{template "nodefacts/probe" .Probe}}
{{template "nodefacts/expiry" .Expiry}}
