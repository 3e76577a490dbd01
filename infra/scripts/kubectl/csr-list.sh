# Reads every CertificateSigningRequest as a JSON List. Fails when the
# API does not answer.
{{.Kubectl}} get csr -o json
