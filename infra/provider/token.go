package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/kubeadm"
)

// joinTokenTTL bounds a join token's life should its join never delete it
// (a node that died mid-join).
const joinTokenTTL = time.Hour

// tokenSecret is the bootstrap token Secret kubeadm itself would create:
// for authentication only (joins discover the cluster from a file, so no
// cluster-info signature is needed), in kubeadm's group.
func tokenSecret(token, node string, now time.Time) ([]byte, error) {
	id, secret, ok := strings.Cut(token, ".")
	if !ok {
		return nil, fmt.Errorf("the join token of %s is malformed", node)
	}
	return yaml.Marshal(corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: "kube-system"},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id":                       id,
			"token-secret":                   secret,
			"description":                    "homelab: the join of " + node + ", deleted once it joined",
			"expiration":                     now.Add(joinTokenTTL).UTC().Format(time.RFC3339),
			"usage-bootstrap-authentication": "true",
			"auth-extra-groups":              kubeadm.BootstrapGroup,
		},
	})
}

// JoinTokenSecret is the Secret node's join token is created as, for a
// script that builds the cluster step by step as up does (infra/lab/bench):
// it goes to `kubectl create -f -` on stdin.
func JoinTokenSecret(token, node string) ([]byte, error) { return tokenSecret(token, node, time.Now()) }

// tokenArgs are the values of the token/ scripts.
type tokenArgs struct {
	// Kubectl is the kubectl command line of a control-plane node.
	Kubectl string
	// ID is the token's id, the part before its dot.
	ID string
	// Type is the bootstrap tokens' Secret type (token/delete-init).
	Type string
}

// createToken makes the node's join token exist, fresh, on via. The token
// travels on stdin, never on a command line (ps on the node would show
// it), and `kubectl create` keeps no last-applied copy of it.
func createToken(ctx context.Context, c ssh.Executor, viaNode, node, token string) error {
	manifest, err := tokenSecret(token, node, time.Now())
	if err != nil {
		return err
	}
	id, _, _ := strings.Cut(token, ".")
	// Delete and create: the same again after a blip.
	r, err := outliveBlips(ctx, func() (ssh.Result, error) {
		return c.RunInput(ctx, scripts.Render("token/create", tokenArgs{Kubectl: kubectl, ID: id}).String(), manifest)
	})
	if err != nil {
		return fmt.Errorf("%s: creating %s's join token: %w", viaNode, node, err)
	}
	if r.ExitCode != 0 {
		return fmt.Errorf("%s: creating %s's join token failed: %s", viaNode, node, redact(string(r.Stderr)))
	}
	return nil
}

// deleteToken removes the node's join token once its join is over.
func deleteToken(ctx context.Context, c ssh.Executor, viaNode, token string) error {
	id, _, _ := strings.Cut(token, ".")
	_, err := mustAPI(ctx, c, viaNode, "deleting a join token", scripts.Render("token/delete", tokenArgs{Kubectl: kubectl, ID: id}))
	return err
}

// deleteInitTokens removes the token kubeadm init mints for itself (it
// always makes one): right after a new cluster's init no other exists, and
// nothing here uses it, since every join brings its own.
func deleteInitTokens(ctx context.Context, c ssh.Executor, node string) error {
	_, err := must(ctx, c, node, "deleting kubeadm init's bootstrap token",
		scripts.Render("token/delete-init", tokenArgs{Kubectl: kubectl, Type: string(corev1.SecretTypeBootstrapToken)}))
	return err
}
