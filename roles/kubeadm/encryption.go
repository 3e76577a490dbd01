package kubeadm

// encryptionConfiguration is kube-apiserver's EncryptionConfiguration: the
// apiserver encrypts Secrets at rest in etcd with the bundle's key, so an
// etcd snapshot or a stolen disk does not leak them.
type encryptionConfiguration struct {
	TypeMeta  `json:",inline"`
	Resources []encryptionResource `json:"resources"`
}

type encryptionResource struct {
	Resources []string         `json:"resources"`
	Providers []map[string]any `json:"providers"`
}

// Encryption renders the EncryptionConfiguration for the bundle's secretbox
// key. identity stays last so Secrets written before encryption still read.
func Encryption(secretboxKey string) ([]byte, error) {
	return marshalDocs(encryptionConfiguration{
		TypeMeta: TypeMeta{"apiserver.config.k8s.io/v1", "EncryptionConfiguration"},
		Resources: []encryptionResource{{
			Resources: []string{"secrets"},
			Providers: []map[string]any{
				{"secretbox": map[string]any{"keys": []map[string]string{{"name": "homelab", "secret": secretboxKey}}}},
				{"identity": map[string]any{}},
			},
		}},
	})
}
