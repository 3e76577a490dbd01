# Tells whether the API answers /readyz through admin.conf (.AdminConf),
# at .Server when set (one node's own apiserver), else at the server the
# kubeconfig names (the cluster's endpoint).
kubectl --kubeconfig {{q .AdminConf}}{{with .Server}} --server {{q .}}{{end}} get --raw=/readyz
