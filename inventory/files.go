package inventory

import (
	"errors"
	"io/fs"
	"os"
)

// LoadWithFiles is Load, also checking that every file the inventory
// names exists and can be read, all problems (the inventory's and the
// files') reported at once. homelab validate and up use it, so a missing
// key or chart is named before anything runs; Load alone does not look at
// the files, so an inventory can be read before they exist (the emulated
// homelab writes lab.yaml's when it starts; unit tests have none).
func LoadWithFiles(path string) (*Inventory, []*Problem, error) {
	return load(path, true)
}

// namedFile is a file an inventory field names (already resolved to an
// absolute path) and how to fix its absence.
type namedFile struct {
	field, path, fix string
}

func (inv *Inventory) namedFiles() []namedFile {
	files := []namedFile{
		{"ssh.privateKey", inv.SSH.PrivateKey, "name the key homelab logs in to the nodes with, or make one (ssh-keygen -t ed25519) and install it on them"},
		{"ssh.knownHosts", inv.SSH.KnownHosts, "name the known_hosts file holding the nodes' host keys, or create it and run `homelab hosts accept NODE -f FILE` for each node after checking its fingerprint"},
	}
	if p := inv.Cluster.Cilium.Chart; p != "" {
		files = append(files, namedFile{"cluster.cilium.chart", p, "fetch it (`helm pull cilium/cilium --version X`), or remove the field to use the official chart"})
	}
	// The keyring is read only when homelab installs the packages.
	if r := inv.Cluster.ContainerRuntime.RuntimeRepository(); r != nil && r.Keyring != "" {
		files = append(files, namedFile{RuntimeKeyringField, r.Keyring, "name the repository's dearmored signing key (a .gpg file), or remove the field to fetch URL/gpg"})
	}
	if p := inv.Cluster.Packages; p.Manage && p.Keyring != "" {
		files = append(files, namedFile{"cluster.packages.keyring", p.Keyring, "name the repository's dearmored signing key (a .gpg file), or remove the field for the Kubernetes project's own"})
	}
	if s3 := inv.Cluster.Etcd.SnapshotsS3(); s3 != nil {
		files = append(files, namedFile{S3CredentialsField, s3.Credentials.File, "name the AWS shared credentials file holding the bucket's keys"})
		if s3.CAFile != "" {
			files = append(files, namedFile{"cluster.etcd.snapshots.s3.caFile", s3.CAFile, "name the PEM file of the CA the endpoint's certificate chains to, or remove the field if the nodes trust it already"})
		}
	}
	return files
}

// checkFiles reports every named file that is missing, a directory or
// unreadable, naming the path it was read at: a relative path in the
// inventory is relative to the inventory's own directory, which the user
// may not expect.
func checkFiles(ps *problems, inv *Inventory) {
	for _, f := range inv.namedFiles() {
		if f.path == "" {
			continue
		}
		fi, err := os.Stat(f.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			ps.errorf(f.field, "%s does not exist (a relative path is read from the inventory's directory, ~/ from your home); %s", f.path, f.fix)
		case err != nil:
			ps.errorf(f.field, "%s cannot be read (%v); %s", f.path, err, f.fix)
		case fi.IsDir():
			ps.errorf(f.field, "%s is a directory; name the file in it", f.path)
		default:
			r, err := os.Open(f.path)
			if err != nil {
				ps.errorf(f.field, "%s cannot be read (%v); give yourself read access, or %s", f.path, err, f.fix)
				continue
			}
			r.Close()
		}
	}
}
