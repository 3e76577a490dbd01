package provider

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/servingcert"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// KubeletServing gives a node's kubelet a serving certificate from the
// cluster CA, which the API server verifies (kubelet-certificate-authority)
// when it reaches the kubelet for logs, exec, port-forward and metrics.
// Without it the kubelet serves a self-signed certificate that nothing can
// verify, so every client of port 10250 (metrics-server among them, which
// then needs --kubelet-insecure-tls) trusts whatever answers at the
// node's address.
//
// The kubelet asks for the certificate itself (serverTLSBootstrap) with a
// CSR that Kubernetes leaves pending: approving it is up's, and up approves
// only a request whose every name is the node's own as the inventory
// declares it (infra/servingcert). The kubelet renews the certificate the
// same way before it expires, and the next up approves the renewal;
// `homelab doctor` shows a request left waiting. A kubelet configured
// without serverTLSBootstrap (a cluster built before this resource, or by
// hand and adopted) has the setting turned on in its configuration and
// in kubeadm's kubelet-config, and is restarted: its pods keep running.
type KubeletServing struct{}

type KubeletServingArgs struct {
	// Connection is the node whose kubelet it is.
	Connection Connection `pulumi:"connection"`
	// Via is a control-plane node with admin.conf, where CSRs are read and
	// approved.
	Via  Connection `pulumi:"via"`
	Node string     `pulumi:"node"`
	// Address is the node's declared address (the kubelet's node IP): the
	// one IP address its certificate may name.
	Address string `pulumi:"address"`
}

type KubeletServingState struct {
	KubeletServingArgs
	// LiveBootstrap: the kubelet's configuration has serverTLSBootstrap on.
	LiveBootstrap bool `pulumi:"liveBootstrap"`
	// LiveCertificate is the certificate the kubelet serves with (PEM, no
	// key), LiveCA the cluster CA the node has; empty when absent.
	LiveCertificate string `pulumi:"liveCertificate,optional"`
	LiveCA          string `pulumi:"liveCA,optional"`
	// LivePending are the node's pending serving requests that up would
	// approve (a request it would not approve is doctor's to report: it
	// must not keep every up busy).
	LivePending []string `pulumi:"livePending,optional"`
}

func (k *KubeletServing) Annotate(a infer.Annotator) {
	a.Describe(&k, "A node's kubelet serving with a certificate from the cluster CA: serverTLSBootstrap on, its CSRs approved once every name in them is the node's own.")
	a.SetToken("index", "KubeletServing")
}

func (in KubeletServingArgs) node() servingcert.Node {
	return servingcert.Node{Name: in.Node, Address: in.Address}
}

// servingWait bounds how long up waits for a kubelet to ask for its
// certificate and to store the one approved: the kubelet asks within
// seconds of registering its Node, or of restarting.
const servingWait = 3 * time.Minute

func (KubeletServing) Create(ctx context.Context, req infer.CreateRequest[KubeletServingArgs]) (infer.CreateResponse[KubeletServingState], error) {
	in := req.Inputs
	st := KubeletServingState{KubeletServingArgs: in, LiveBootstrap: true}
	if req.DryRun {
		return infer.CreateResponse[KubeletServingState]{ID: in.Node, Output: st}, nil
	}
	st, err := convergeServing(ctx, in)
	return infer.CreateResponse[KubeletServingState]{ID: in.Node, Output: st}, err
}

func (KubeletServing) Update(ctx context.Context, req infer.UpdateRequest[KubeletServingArgs, KubeletServingState]) (infer.UpdateResponse[KubeletServingState], error) {
	in := req.Inputs
	if req.DryRun {
		return infer.UpdateResponse[KubeletServingState]{Output: KubeletServingState{KubeletServingArgs: in, LiveBootstrap: true}}, nil
	}
	if len(servingChanges(in, req.State, time.Now())) == 0 {
		st := req.State
		st.KubeletServingArgs = in
		return infer.UpdateResponse[KubeletServingState]{Output: st}, nil
	}
	st, err := convergeServing(ctx, in)
	return infer.UpdateResponse[KubeletServingState]{Output: st}, err
}

// Delete leaves the kubelet as it is: its certificate is its own, and
// the node's join's delete resets the node.
func (KubeletServing) Delete(ctx context.Context, req infer.DeleteRequest[KubeletServingState]) (infer.DeleteResponse, error) {
	return infer.DeleteResponse{}, nil
}

// servingChanges is what converging the node's kubelet serving would do.
func servingChanges(in KubeletServingArgs, st KubeletServingState, now time.Time) changeSet {
	d := changeSet{}
	if in.Node != st.Node {
		d.replace("node")
		return d
	}
	if !st.LiveBootstrap {
		d.update("serverTLSBootstrap")
	}
	if servingProblem(in.node(), st.LiveCertificate, st.LiveCA, now) != nil {
		d.update("certificate")
	}
	if len(st.LivePending) > 0 {
		d.update("pending")
	}
	return d
}

func (KubeletServing) Diff(ctx context.Context, req infer.DiffRequest[KubeletServingArgs, KubeletServingState]) (infer.DiffResponse, error) {
	return servingChanges(req.Inputs, req.State, time.Now()).diff(false), nil
}

// servingProblem says why certPEM is not node's serving certificate from
// the CA caPEM, valid at now; nil when it is.
func servingProblem(node servingcert.Node, certPEM, caPEM string, now time.Time) error {
	if certPEM == "" {
		return errors.New("the kubelet has no serving certificate from the cluster CA")
	}
	cert, err := servingcert.ParseCertificate([]byte(certPEM))
	if err != nil {
		return fmt.Errorf("%s: %w", nodefacts.KubeletServingCert, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(caPEM)) {
		return fmt.Errorf("%s holds no CA certificate", nodefacts.CACert)
	}
	return servingcert.CheckCertificate(cert, pool, node, now)
}

// servingRead: a node that cannot be read keeps its last known state
// (nothing says its certificate went); one whose reply is not understood
// is read as having none, so up looks again.
var servingRead = keepOrRecheck(func(st KubeletServingState) KubeletServingState {
	st.LiveCertificate = ""
	return st
})

func (KubeletServing) Read(ctx context.Context, req infer.ReadRequest[KubeletServingArgs, KubeletServingState]) (infer.ReadResponse[KubeletServingArgs, KubeletServingState], error) {
	ctx = reading(ctx)
	last := req.State
	last.Via = currentVia(last.Via, req.Inputs.Via)
	st, err := readNode(ctx, last.Connection, last, servingRead, func(c ssh.Executor) (KubeletServingState, error) {
		st := last
		return st, readServing(ctx, c, &st)
	})
	if err != nil {
		return infer.ReadResponse[KubeletServingArgs, KubeletServingState]{}, err
	}
	st, err = readNode(ctx, last.Via, st, servingRead, func(c ssh.Executor) (KubeletServingState, error) {
		pending, _, err := configOf(ctx).batches.servingCSRs.get(ctx, last.Via, c, st.Node)
		if err != nil {
			return st, unanswered(fmt.Errorf("%s: %w", last.Via.Node, err))
		}
		st.LivePending = approvable(pending, st.node())
		return st, nil
	})
	if err != nil {
		return infer.ReadResponse[KubeletServingArgs, KubeletServingState]{}, err
	}
	return infer.ReadResponse[KubeletServingArgs, KubeletServingState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

type servingReadArgs struct{ Config, Current, CA string }

var servingReadScript = scripts.Render("kubelet/serving-read", servingReadArgs{
	Config: nodefacts.KubeletConfigFile, Current: nodefacts.KubeletServingCert, CA: nodefacts.CACert,
})

// readServing records the node's kubelet configuration and certificates.
func readServing(ctx context.Context, c ssh.Executor, st *KubeletServingState) error {
	out, code, err := query(ctx, c, servingReadScript)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("reading the kubelet's serving certificate: exit %d", code)
	}
	sections := servingSections(out)
	st.LiveBootstrap = strings.TrimSpace(sections["serverTLSBootstrap"]) == "true"
	st.LiveCertificate = sections["certificate"]
	st.LiveCA = sections["ca"]
	return nil
}

// servingSections splits kubelet/serving-read's output by its "== NAME"
// lines.
func servingSections(out string) map[string]string {
	sections := map[string]string{}
	name := ""
	for _, line := range strings.SplitAfter(out, "\n") {
		if h, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "== "); ok {
			name = h
			sections[name] = ""
			continue
		}
		if name != "" {
			sections[name] += line
		}
	}
	return sections
}

// approvable are the names of the pending requests of node that pass the
// check, sorted.
func approvable(pending []certificatesv1.CertificateSigningRequest, node servingcert.Node) []string {
	var out []string
	for _, csr := range pending {
		if servingcert.Check(csr, node) == nil {
			out = append(out, csr.Name)
		}
	}
	slices.Sort(out)
	return out
}

// pendingServing are the kubelet serving requests still waiting, by the
// node whose kubelet made them (its user's name).
func pendingServing(list []certificatesv1.CertificateSigningRequest) map[string][]certificatesv1.CertificateSigningRequest {
	out := map[string][]certificatesv1.CertificateSigningRequest{}
	for _, csr := range list {
		node, ok := strings.CutPrefix(csr.Spec.Username, "system:node:")
		if !ok || csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || !servingcert.Pending(csr) {
			continue
		}
		out[node] = append(out[node], csr)
	}
	return out
}

// listCSRs reads every CSR through the via node.
func listCSRs(ctx context.Context, c ssh.Executor) ([]certificatesv1.CertificateSigningRequest, error) {
	out, err := queryAPI(ctx, c, scripts.Render("kubectl/csr-list", kubectlArgs{Kubectl: kubectl}))
	if err != nil {
		return nil, fmt.Errorf("reading the CSRs: %w", err)
	}
	var list certificatesv1.CertificateSigningRequestList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("reading the CSRs: %w", err)
	}
	return list.Items, nil
}

// getServingCSRs is the read batch's command: the pending serving
// requests of the nodes asked for.
func getServingCSRs(ctx context.Context, c ssh.Executor, nodes []string) (map[string][]certificatesv1.CertificateSigningRequest, error) {
	list, err := listCSRs(ctx, c)
	if err != nil {
		return nil, err
	}
	byNode := pendingServing(list)
	out := map[string][]certificatesv1.CertificateSigningRequest{}
	for _, n := range nodes {
		out[n] = byNode[n]
	}
	return out, nil
}

type csrArgs struct{ Kubectl, Name string }

// convergeServing turns the kubelet's serverTLSBootstrap on where it is
// off, then approves the node's requests that pass the check until the
// kubelet serves a certificate of the cluster CA for the node's declared
// name and address, and returns what the node then has.
func convergeServing(ctx context.Context, in KubeletServingArgs) (KubeletServingState, error) {
	st := KubeletServingState{KubeletServingArgs: in}
	c, err := dial(ctx, in.Connection)
	if err != nil {
		return st, err
	}
	defer c.Close()
	v, err := dial(ctx, in.Via)
	if err != nil {
		return st, err
	}
	defer v.Close()
	if err := readServing(ctx, c, &st); err != nil {
		return st, fmt.Errorf("%s: %w", in.Node, err)
	}
	if !st.LiveBootstrap {
		if _, err := mustAPI(ctx, v, in.Via.Node, "turning on serverTLSBootstrap in kube-system/kubelet-config", scripts.Render("kubectl/kubelet-config-serving", kubectlArgs{Kubectl: kubectl})); err != nil {
			return st, err
		}
		if _, err := must(ctx, c, in.Node, "turning on the kubelet's serverTLSBootstrap", scripts.Render("kubelet/serving-enable", servingReadArgs{Config: nodefacts.KubeletConfigFile})); err != nil {
			return st, err
		}
		st.LiveBootstrap = true
	}
	node := in.node()
	refused := map[string]error{}
	deadline := time.Now().Add(servingWait)
	for {
		// Through the read batch: the nodes that joined together ask
		// for their requests in one kubectl run on the via node.
		pending, _, err := configOf(ctx).batches.servingCSRs.get(ctx, in.Via, v, in.Node)
		var api *apiRefused
		switch {
		case errors.As(err, &api) && endpointBlip(api.reason) && time.Now().Before(deadline):
			// The endpoint blipped (a control-plane node joining beside
			// this one): the requests are asked for again below.
			pending = nil
		case err != nil:
			return st, fmt.Errorf("%s: %w", in.Via.Node, err)
		}
		for _, csr := range pending {
			if err := servingcert.Check(csr, node); err != nil {
				if _, seen := refused[csr.Name]; !seen {
					p.GetLogger(ctx).Warningf("%s's kubelet asks for a serving certificate up does not approve (CSR %s): %v", in.Node, csr.Name, oneLine(err))
				}
				refused[csr.Name] = err
				continue
			}
			if _, err := mustAPI(ctx, v, in.Via.Node, "approving "+in.Node+"'s serving certificate "+csr.Name, scripts.Render("kubectl/csr-approve", csrArgs{Kubectl: kubectl, Name: csr.Name})); err != nil {
				return st, err
			}
		}
		if err := readServing(ctx, c, &st); err != nil {
			return st, fmt.Errorf("%s: %w", in.Node, err)
		}
		problem := servingProblem(node, st.LiveCertificate, st.LiveCA, time.Now())
		if problem == nil {
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, servingTimeout(in, problem, refused)
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// servingTimeout names what kept the node's kubelet without its
// certificate and what to do about it.
func servingTimeout(in KubeletServingArgs, problem error, refused map[string]error) error {
	if len(refused) == 0 {
		return fmt.Errorf("%s: after %s the kubelet serves no certificate of the cluster CA for %s and %s (%v), and asked for none: is it running? (journalctl -u kubelet on %s)",
			in.Node, servingWait, in.Node, in.Address, oneLine(problem), in.Node)
	}
	var why []string
	for _, name := range slices.Sorted(maps.Keys(refused)) {
		why = append(why, fmt.Sprintf("CSR %s: %v", name, oneLine(refused[name])))
	}
	return fmt.Errorf("%s: the kubelet asks for serving certificates up does not approve, since they name more than the node's declared name %s and address %s: %s. If the node's address changed, declare the new one as its address in the inventory and run up; a request that is not this node's should be denied (kubectl certificate deny NAME)",
		in.Node, in.Node, in.Address, strings.Join(why, "; "))
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
