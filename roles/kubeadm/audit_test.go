package kubeadm

import (
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// The policy loads with the apiserver's own loader (what kube-apiserver
// runs on --audit-policy-file), and its rules give each kind of request
// the level the policy's comment promises.
func TestAuditPolicy(t *testing.T) {
	path, data := Audit()
	if !strings.HasPrefix(path, AuditDir+"/policy-") {
		t.Errorf("the policy's path %s", path)
	}
	p, err := policy.LoadPolicyFromBytes(data)
	if err != nil {
		t.Fatalf("kube-apiserver refuses the policy: %v\n%s", err, data)
	}
	eval := policy.NewPolicyRuleEvaluator(p)
	admin := &user.DefaultInfo{Name: "kubernetes-admin", Groups: []string{"kubeadm:cluster-admins"}}
	kubelet := &user.DefaultInfo{Name: "system:node:gpu-1", Groups: []string{"system:nodes"}}
	for _, tc := range []struct {
		name string
		attr authorizer.AttributesRecord
		want audit.Level
	}{
		{"keepalived's health check", authorizer.AttributesRecord{Verb: "get", Path: "/livez"}, audit.LevelNone},
		{"a readiness probe with a check", authorizer.AttributesRecord{Verb: "get", Path: "/readyz/etcd"}, audit.LevelNone},
		{"a kubelet renewing its lease", authorizer.AttributesRecord{User: kubelet, Verb: "update", APIGroup: "coordination.k8s.io", Resource: "leases", ResourceRequest: true}, audit.LevelNone},
		{"an event", authorizer.AttributesRecord{User: kubelet, Verb: "create", Resource: "events", ResourceRequest: true}, audit.LevelNone},
		{"a Secret written", authorizer.AttributesRecord{User: admin, Verb: "create", Resource: "secrets", ResourceRequest: true}, audit.LevelMetadata},
		{"a Secret read", authorizer.AttributesRecord{User: admin, Verb: "get", Resource: "secrets", ResourceRequest: true}, audit.LevelMetadata},
		{"a token requested", authorizer.AttributesRecord{User: kubelet, Verb: "create", Resource: "serviceaccounts", Subresource: "token", ResourceRequest: true}, audit.LevelMetadata},
		{"pods listed", authorizer.AttributesRecord{User: admin, Verb: "list", Resource: "pods", ResourceRequest: true}, audit.LevelMetadata},
		{"a Deployment changed", authorizer.AttributesRecord{User: admin, Verb: "patch", APIGroup: "apps", Resource: "deployments", ResourceRequest: true}, audit.LevelRequest},
		{"a Node deleted", authorizer.AttributesRecord{User: admin, Verb: "delete", Resource: "nodes", ResourceRequest: true}, audit.LevelRequest},
	} {
		if got := eval.EvaluatePolicyRule(tc.attr).Level; got != tc.want {
			t.Errorf("%s: level %s, want %s", tc.name, got, tc.want)
		}
	}
}
