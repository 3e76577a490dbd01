package inventory

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Minor is the cluster's Kubernetes minor as pkgs.k8s.io names its
// repositories (v1.34); "" when kubernetesVersion is not a version.
func (c Cluster) Minor() string {
	v, err := version.ParseSemantic(c.KubernetesVersion)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("v%d.%d", v.Major(), v.Minor())
}

// PackagesRepository is cluster.packages.repository for the cluster's
// minor, ending in a slash (apt reads the flat repository's files below it).
func (c Cluster) PackagesRepository() string {
	return expandRepository(c.Packages.Repository, c.Minor())
}

func expandRepository(tmpl, minor string) string {
	u := strings.ReplaceAll(tmpl, MinorPlaceholder, minor)
	if u != "" && !strings.HasSuffix(u, "/") {
		u += "/"
	}
	return u
}

// ReadKeyring reads cluster.packages.keyring and checks it is what apt's
// signed-by wants there: a binary OpenPGP keyring starting with a public
// key, not an ASCII-armoured key or a GnuPG keybox. The error names the
// field and the command that makes the right file.
func (p Packages) ReadKeyring() ([]byte, error) {
	return ReadKeyringFile("cluster.packages.keyring", p.Keyring)
}

// ReadKeyringFile reads the keyring file the inventory's field names, as
// ReadKeyring.
func ReadKeyringFile(field, file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if err := checkKeyring(data); err != nil {
		return nil, fmt.Errorf("%s: %s %w", field, file, err)
	}
	return data, nil
}

func checkKeyring(data []byte) error {
	switch {
	case len(data) == 0:
		return fmt.Errorf("is empty; give the repository's signing key, dearmored: curl -fsSL REPOSITORY/Release.key | gpg --dearmor -o FILE")
	case bytes.HasPrefix(bytes.TrimSpace(data), []byte("-----BEGIN PGP")):
		return fmt.Errorf("is ASCII-armoured; apt reads a .gpg keyring only dearmored: gpg --dearmor -o FILE.gpg < KEY.asc")
	case len(data) >= 12 && string(data[8:12]) == "KBXf":
		return fmt.Errorf("is a GnuPG keybox, which apt cannot read; export the key as a keyring: gpg --export KEYID > FILE.gpg")
	case !isPublicKeyPacket(data[0]):
		return fmt.Errorf("is not an OpenPGP keyring (its first packet is no public key); give the dearmored Release.key: gpg --dearmor -o FILE.gpg < Release.key")
	}
	return nil
}

// isPublicKeyPacket reads an OpenPGP packet header's first byte (RFC 4880
// 4.2): the old format keeps the tag in bits 5-2, the new one in bits 5-0;
// tag 6 is a public key.
func isPublicKeyPacket(b byte) bool {
	if b&0x80 == 0 {
		return false
	}
	if b&0x40 != 0 {
		return b&0x3f == 6
	}
	return (b>>2)&0x0f == 6
}

// checkAptURL checks raw (the URL as written; parsed after expansion,
// already done by the caller) as a repository URL for an apt sources
// line: absolute, https, http or file, plain. It reports the first
// problem on field, with example as the way, and returns the URL when
// there is none.
func checkAptURL(ps *problems, field, raw, expanded, example string) (*url.URL, bool) {
	u, err := url.Parse(expanded)
	switch {
	case strings.ContainsAny(raw, " \t\r\n[]#\"'"):
		ps.errorf(field, "%q holds a space, bracket, quote or #, which end the apt sources line it goes in; use a plain URL such as %s", raw, example)
	case err != nil || !u.IsAbs():
		ps.errorf(field, "%q is not an absolute URL; use e.g. %s", raw, example)
	case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "file":
		ps.errorf(field, "%q: apt here reads https, http or file URLs, not %s; use e.g. %s", raw, u.Scheme, example)
	case u.Scheme != "file" && u.Host == "":
		ps.errorf(field, "%q names no host; use e.g. %s", raw, example)
	case u.Scheme == "file" && !strings.HasPrefix(u.Path, "/"):
		ps.errorf(field, "%q: a file URL needs an absolute path, e.g. file:/srv/mirror/", raw)
	case u.User != nil || u.RawQuery != "":
		ps.errorf(field, "%q carries credentials or a query, which would land in every node's sources list; use a plain URL", raw)
	default:
		return u, true
	}
	return nil, false
}

func checkPackages(ps *problems, inv *Inventory) {
	p := inv.Cluster.Packages
	const field = "cluster.packages.repository"
	example := DefaultPackagesRepository + " (" + MinorPlaceholder + " stands for the cluster's minor, v1.34)"
	if u, ok := checkAptURL(ps, field, p.Repository, expandRepository(p.Repository, "v1.0"), example); ok {
		if !strings.Contains(p.Repository, MinorPlaceholder) {
			ps.warnf(field, "%q has no %s: it serves one minor, so when cluster.kubernetesVersion moves to another minor, change it too", p.Repository, MinorPlaceholder)
		}
		// The key is the trust anchor: over plain http anyone on the path
		// could hand the nodes their own key and sign packages with it.
		if u.Scheme == "http" && p.Keyring == "" && p.Manage {
			ps.errorf("cluster.packages.keyring", "is required with an http repository (%s): the nodes would fetch the signing key itself unauthenticated; give the repository's key, dearmored, as a file on this machine", p.Repository)
		}
	}
}
