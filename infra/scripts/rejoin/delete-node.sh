# Deletes the Node .Node its previous machine left, so that the new one
# can join under its name (gone already is fine). Returns once the API
# accepted the deletion.
{{.Kubectl}} delete node {{q .Node}} --ignore-not-found --wait=false
