package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/homelab-dev/homelab/infra/servingcert"
	"github.com/homelab-dev/homelab/inventory"
)

// Kubelet serving certificates: each kubelet asks the cluster CA for one
// (serverTLSBootstrap), and `homelab up` approves a request whose names
// are all the node's own. A request left waiting is a kubelet renewing
// since the last up, or one asking for names up will not sign.

// servingVerdict judges a node's pending serving requests.
func servingVerdict(node inventory.Node, pending []certificatesv1.CertificateSigningRequest) (Status, string) {
	sn := servingcert.Node{Name: node.Name, Address: node.Address}
	var waiting, refused []string
	for _, csr := range pending {
		if err := servingcert.Check(csr, sn); err != nil {
			refused = append(refused, fmt.Sprintf("%s (%s)", csr.Name, strings.ReplaceAll(err.Error(), "\n", "; ")))
			continue
		}
		waiting = append(waiting, csr.Name)
	}
	slices.Sort(waiting)
	slices.Sort(refused)
	switch {
	case len(refused) > 0:
		return Fail, fmt.Sprintf("the kubelet asks for serving certificates naming more than %s and %s, which up does not approve: %s", node.Name, node.Address, strings.Join(refused, "; "))
	case len(waiting) > 0:
		return Warn, fmt.Sprintf("serving certificate request %s waits for approval (a renewal): the next homelab up approves it", strings.Join(waiting, ", "))
	}
	return OK, "no serving certificate request waiting"
}

// checkServing adds each node's kubelet serving row from the API's CSRs.
func (d *doctor) checkServing(ctx context.Context) {
	cs, _, err := d.apiClient(ctx)
	if err != nil {
		d.r.add("kubelet serving", "api", Fail, "%v", err)
		return
	}
	list, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		d.r.add("kubelet serving", "api", Fail, "listing CSRs: %v", err)
		return
	}
	byUser := map[string][]certificatesv1.CertificateSigningRequest{}
	for _, csr := range list.Items {
		if csr.Spec.SignerName == certificatesv1.KubeletServingSignerName && servingcert.Pending(csr) {
			byUser[csr.Spec.Username] = append(byUser[csr.Spec.Username], csr)
		}
	}
	for _, n := range d.t.Inventory.Nodes {
		st, detail := servingVerdict(n, byUser[servingcert.Node{Name: n.Name}.User()])
		d.r.add("kubelet serving", n.Name, st, "%s", detail)
		if st == Fail {
			d.r.cause("%s's kubelet asks for a serving certificate for names that are not its own as the inventory declares them: if its address changed, declare the new one and run homelab up; otherwise deny the request (kubectl certificate deny NAME)", n.Name)
		}
	}
}
