package kubeadm

import (
	"crypto/sha256"
	"encoding/hex"

	"sigs.k8s.io/yaml"
)

// Paths of the apiserver's audit policy and log on a control-plane node.
const (
	AuditDir    = "/etc/kubernetes/audit"
	AuditLogDir = "/var/log/kubernetes/audit"
	AuditLog    = AuditLogDir + "/audit.log"
)

// The audit log's rotation, by the apiserver itself: at most
// auditLogMaxBackups files of auditLogMaxSizeMB beside the live one (about
// 1 GB on the disk etcd shares), none older than auditLogMaxAgeDays.
const (
	auditLogMaxSizeMB   = "100"
	auditLogMaxBackups  = "10"
	auditLogMaxAgeDays  = "30"
	auditPolicyVolume   = "audit-policy"
	auditLogVolume      = "audit-log"
	auditPolicyAPIGroup = "audit.k8s.io/v1"
)

// auditPolicy is audit.k8s.io/v1 Policy: the rules are tried in order,
// the first that matches decides.
type auditPolicy struct {
	TypeMeta   `json:",inline"`
	OmitStages []string    `json:"omitStages"`
	Rules      []auditRule `json:"rules"`
}

type auditRule struct {
	Level           string       `json:"level"`
	Users           []string     `json:"users,omitempty"`
	Verbs           []string     `json:"verbs,omitempty"`
	Resources       []auditGroup `json:"resources,omitempty"`
	NonResourceURLs []string     `json:"nonResourceURLs,omitempty"`
}

type auditGroup struct {
	Group     string   `json:"group"`
	Resources []string `json:"resources"`
}

// Audit is the apiserver's audit policy and the path it lands at: who
// changed what, and who read Secrets, kept on every control-plane node.
// What would drown it is left out: health probes (keepalived asks /livez
// every second), Leases (every kubelet and leader renews one every few
// seconds) and Events. Secrets, ConfigMaps and tokens are logged at
// Metadata, never with their content: the log must not become a second
// copy of the cluster's secrets. Other writes are logged with their
// request.
//
// The file's name carries its content's hash: the apiserver reads the
// policy only when it starts, so a new policy is a new
// --audit-policy-file, and the manifests naming it are regenerated one
// node at a time, which restarts each apiserver on it.
func Audit() (path string, content []byte) { return auditPolicyPath, auditPolicyDoc }

var auditPolicyDoc, auditPolicyPath = renderAudit()

func renderAudit() ([]byte, string) {
	doc, err := yaml.Marshal(auditPolicy{
		TypeMeta:   TypeMeta{auditPolicyAPIGroup, "Policy"},
		OmitStages: []string{"RequestReceived"},
		Rules: []auditRule{
			{Level: "None", NonResourceURLs: []string{"/livez*", "/readyz*", "/healthz*", "/version"}},
			{Level: "None", Resources: []auditGroup{{Group: "coordination.k8s.io", Resources: []string{"leases"}}}},
			{Level: "None", Resources: []auditGroup{{Group: "", Resources: []string{"events"}}, {Group: "events.k8s.io", Resources: []string{"events"}}}},
			{Level: "Metadata", Resources: []auditGroup{
				{Group: "", Resources: []string{"secrets", "configmaps", "serviceaccounts/token"}},
				{Group: "authentication.k8s.io", Resources: []string{"tokenreviews"}},
				{Group: "certificates.k8s.io", Resources: []string{"certificatesigningrequests"}},
			}},
			{Level: "Metadata", Verbs: []string{"get", "list", "watch"}},
			{Level: "Request"},
		},
	})
	if err != nil {
		panic(err) // constant data: a failure is a bug caught by any test
	}
	return doc, hashedPath(AuditDir, "policy", doc)
}

// hashedPath is where a file the apiserver reads only at start lands:
// named by its content's hash, so new content is a new flag value, which
// regenerates the manifests naming it and so restarts each apiserver.
func hashedPath(dir, name string, content []byte) string {
	sum := sha256.Sum256(content)
	return dir + "/" + name + "-" + hex.EncodeToString(sum[:4]) + ".yaml"
}

// auditArgs and auditVolumes are the apiserver's side of the audit log.
var auditArgs = []Arg{
	{Name: "audit-policy-file", Value: auditPolicyPath},
	{Name: "audit-log-path", Value: AuditLog},
	{Name: "audit-log-maxsize", Value: auditLogMaxSizeMB},
	{Name: "audit-log-maxbackup", Value: auditLogMaxBackups},
	{Name: "audit-log-maxage", Value: auditLogMaxAgeDays},
}

var auditVolumes = []HostPathMnt{
	{Name: auditPolicyVolume, HostPath: AuditDir, MountPath: AuditDir, ReadOnly: true, PathType: "DirectoryOrCreate"},
	{Name: auditLogVolume, HostPath: AuditLogDir, MountPath: AuditLogDir, PathType: "DirectoryOrCreate"},
}
