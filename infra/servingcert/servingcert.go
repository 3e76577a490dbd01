// Package servingcert decides whether a kubelet's serving certificate, or
// its request for one, is what the inventory says the node is. With
// serverTLSBootstrap the kubelet asks the cluster's CA for its serving
// certificate through a CSR that nothing in Kubernetes approves on its own
// (kube-controller-manager signs kubernetes.io/kubelet-serving requests
// only once approved, and its approver never approves them): a node could
// ask for any name or address, and an approver that signs what it is asked
// would let one node impersonate another, or the API's own addresses, to
// every client that trusts the cluster CA. So `up` approves a request only
// when every name in it is the node's own as declared.
package servingcert

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// Node is what the inventory declares of one node: its name (the kubelet's
// node name, which kubeadm makes its hostname address) and its address
// (the kubelet's --node-ip).
type Node struct {
	Name    string
	Address string
}

// User is the API user a node's kubelet authenticates as.
func (n Node) User() string { return "system:node:" + n.Name }

const nodesGroup = "system:nodes"

// allowedUsages are the key usages a kubelet asks for: its certificate
// manager asks for these (key encipherment only with an RSA key).
var allowedUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageDigitalSignature,
	certificatesv1.UsageKeyEncipherment,
	certificatesv1.UsageServerAuth,
}

// Pending reports whether a CSR still waits for a decision: neither
// approved nor denied nor failed.
func Pending(csr certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return false
		}
	}
	return true
}

// IsServingRequestOf reports whether csr is a kubelet serving request made
// by node's kubelet (by who asked, not by what it asks for: Check judges
// that).
func IsServingRequestOf(csr certificatesv1.CertificateSigningRequest, node Node) bool {
	return csr.Spec.SignerName == certificatesv1.KubeletServingSignerName && csr.Spec.Username == node.User()
}

// Check returns every reason not to approve csr as node's serving
// certificate, nil when it is the node's own: asked by the node's kubelet
// (user and group), for the node's identity (CN and O), for no name but
// the node's name and no address but its declared one (the address at
// least, so that the certificate serves the address the API dials), with
// the usages of a serving certificate and nothing else.
func Check(csr certificatesv1.CertificateSigningRequest, node Node) error {
	var errs []error
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName {
		errs = append(errs, fmt.Errorf("signer %q is not %s", csr.Spec.SignerName, certificatesv1.KubeletServingSignerName))
	}
	if csr.Spec.Username != node.User() {
		errs = append(errs, fmt.Errorf("asked by %q, not by %s's kubelet (%s)", csr.Spec.Username, node.Name, node.User()))
	}
	if !slices.Contains(csr.Spec.Groups, nodesGroup) {
		errs = append(errs, fmt.Errorf("asked by a user outside the %s group", nodesGroup))
	}
	for _, u := range csr.Spec.Usages {
		if !slices.Contains(allowedUsages, u) {
			errs = append(errs, fmt.Errorf("usage %q is not a serving certificate's", u))
		}
	}
	if !slices.Contains(csr.Spec.Usages, certificatesv1.UsageServerAuth) {
		errs = append(errs, fmt.Errorf("usages %v lack %q", csr.Spec.Usages, certificatesv1.UsageServerAuth))
	}
	req, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if req.Subject.CommonName != node.User() {
		errs = append(errs, fmt.Errorf("subject CN %q is not %s", req.Subject.CommonName, node.User()))
	}
	if !slices.Equal(req.Subject.Organization, []string{nodesGroup}) {
		errs = append(errs, fmt.Errorf("subject O %v is not [%s]", req.Subject.Organization, nodesGroup))
	}
	errs = append(errs, checkNames(req.DNSNames, req.IPAddresses, node)...)
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		errs = append(errs, fmt.Errorf("e-mail or URI names %v %v: a kubelet asks for none", req.EmailAddresses, req.URIs))
	}
	return errors.Join(errs...)
}

// checkNames holds a request's or a certificate's names to the node's own.
func checkNames(dns []string, ips []net.IP, node Node) []error {
	var errs []error
	for _, d := range dns {
		if !strings.EqualFold(d, node.Name) {
			errs = append(errs, fmt.Errorf("DNS name %q is not the node's name %s", d, node.Name))
		}
	}
	declared := net.ParseIP(node.Address)
	found := false
	for _, ip := range ips {
		if ip.Equal(declared) {
			found = true
			continue
		}
		errs = append(errs, fmt.Errorf("IP address %s is not %s's declared address %s", ip, node.Name, node.Address))
	}
	if !found {
		errs = append(errs, fmt.Errorf("no IP address %s (the node's declared address, which the API server dials)", node.Address))
	}
	return errs
}

func parseRequest(b []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("the request is not a PEM certificate request")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the request does not parse: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("the request's signature: %w", err)
	}
	return req, nil
}

// ParseCertificate reads the first certificate of a PEM file (the store's
// file holds the certificate, then the key).
func ParseCertificate(b []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, errors.New("no certificate in it")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// CheckCertificate returns every reason the certificate is not node's
// serving certificate signed by the cluster CA and valid at now.
func CheckCertificate(cert *x509.Certificate, ca *x509.CertPool, node Node, now time.Time) error {
	var errs []error
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		errs = append(errs, fmt.Errorf("not a serving certificate of the cluster CA valid now: %w", err))
	}
	if cert.Subject.CommonName != node.User() {
		errs = append(errs, fmt.Errorf("subject CN %q is not %s", cert.Subject.CommonName, node.User()))
	}
	errs = append(errs, checkNames(cert.DNSNames, cert.IPAddresses, node)...)
	return errors.Join(errs...)
}
