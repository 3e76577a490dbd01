#!/bin/sh
# Rendered by homelab. keepalived lowers this node's VRRP priority while its
# own kube-apiserver does not answer, so the VIP moves to a node whose does.
# TLS is verified against the cluster CA (127.0.0.1 is one of the SANs).
exec curl --silent --fail --max-time 2 --output /dev/null \
    --cacert /etc/kubernetes/pki/ca.crt https://127.0.0.1:6443/livez
