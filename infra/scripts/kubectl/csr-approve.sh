# Approves the CertificateSigningRequest .Name, which up checked first
# (infra/servingcert). Prints nothing.
{{.Kubectl}} certificate approve {{q .Name}} >/dev/null
