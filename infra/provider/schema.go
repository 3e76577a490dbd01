package provider

import "github.com/pulumi/pulumi-go-provider/infer"

// The schema's documentation of every input and output, so `pulumi package
// get-schema` and `pulumi preview --diff` explain themselves
// (TestSchemaDocumentsEverything fails on a property left out). Which
// methods each resource implements is asserted in provider.go.

func (c *Connection) Annotate(a infer.Annotator) {
	a.Describe(&c, "How a node is reached: SSH with its host key checked against known_hosts.")
	a.Describe(&c.Node, "The node's name in the inventory.")
	a.Describe(&c.Host, "The node's address (the inventory's nodes[].address).")
	a.Describe(&c.Port, "The SSH port (default 22).")
	a.Describe(&c.User, "The SSH user (default root).")
	a.Describe(&c.PrivateKey, "The SSH private key (secret).")
	a.Describe(&c.KnownHosts, "The known_hosts file the node's host key must be in; a changed key is refused until `homelab hosts accept`.")
}

func (h *HostArgs) Annotate(a infer.Annotator) {
	a.Describe(&h.Connection, "How the node is reached.")
	a.Describe(&h.Address, "The address the inventory declares; a node that has another is reported.")
	a.Describe(&h.MAC, "The MAC address the inventory declares (empty: not checked).")
	a.Describe(&h.Requires, "Commands the node must have before anything else runs there (kubeadm, kubelet, ...).")
	a.Describe(&h.ClusterCA, "The pin of the secrets bundle's Kubernetes CA: a node holding another CA runs another cluster, and nothing is written to it.")
	a.Describe(&h.Runtime, "What containerd must agree with (empty: not checked).")
}

func (r *RuntimeExpect) Annotate(a infer.Annotator) {
	a.Describe(&r, "What the kubelet needs of containerd: a managed one must be 1.x (the configuration up writes); one the user configures must run on the kubelet's cgroup driver; either must be a release the declared Kubernetes version runs on.")
	a.Describe(&r.Manage, "Whether up writes containerd's configuration (cluster.containerRuntime.manage).")
	a.Describe(&r.CgroupDriver, "The kubelet's cgroup driver, which containerd's runc must use.")
	a.Describe(&r.SandboxImage, "kubeadm's pause image; another one is a warning.")
	a.Describe(&r.KubernetesVersion, "The declared Kubernetes version: a containerd its kubelet cannot run on is refused, one containerd does not test with it is a warning.")
}

func (h *HostState) Annotate(a infer.Annotator) {
	a.Describe(&h.Hostname, "The node's hostname, read live.")
	a.Describe(&h.Addresses, "The node's primary global IPv4 addresses, read live (the VIP, a secondary address, is left out).")
	a.Describe(&h.MACs, "The MAC addresses of the node's network interfaces, read live.")
	a.Describe(&h.OS, "The node's operating system (os-release PRETTY_NAME).")
	a.Describe(&h.Kernel, "The node's kernel release.")
	a.Describe(&h.Versions, "Installed versions of kubeadm, kubelet, keepalived and containerd, by command.")
	a.Describe(&h.Stamps, "The file each version was read from, by command: path, inode, size, change and modification times. A refresh runs a command for its version only when its stamp changed.")
	a.Describe(&h.GPUs, "NVIDIA GPUs nvidia-smi lists on the node.")
	a.Describe(&h.Missing, "Required commands the node lacks.")
	a.Describe(&h.HostKey, "The fingerprint of the host key seen live.")
	a.Describe(&h.ConvergedHostKey, "The fingerprint of the host key the last up saw; it differs from hostKey once a replaced machine's key was accepted.")
	a.Describe(&h.CA, "The pin of the Kubernetes CA the node holds, read live (empty: none).")
	a.Describe(&h.JoinedAs, "The node name the machine's kubelet holds a client certificate for, read live (empty: none): a machine joined under another name is refused.")
	a.Describe(&h.RuntimeCgroupDriver, "The cgroup driver containerd's runc runs with, read live when the user configures containerd.")
	a.Describe(&h.RuntimeSandboxImage, "The sandbox image containerd runs with, read live when the user configures containerd.")
	a.Describe(&h.RuntimeError, "Why containerd's configuration could not be read, when it could not.")
	a.Describe(&h.RuntimeDown, "Why containerd did not answer on its socket (ctr version), when it did not.")
}

func (f *FileArgs) Annotate(a infer.Annotator) {
	a.Describe(&f.Connection, "How the node is reached.")
	a.Describe(&f.Path, "The file's absolute path on the node.")
	a.Describe(&f.Content, "The file's content (secret for key material and tokens).")
	a.Describe(&f.Mode, "The file's permission bits, e.g. 0600 as 384.")
	a.Describe(&f.OnChange, "The script run after the file was written (never when nothing changed), given the file's path: `sysctl` (load a sysctl file) or `daemon-reload` (systemd reads its units again).")
	a.Describe(&f.Restarts, "The systemd unit that reads the file only when it starts: restarted when an edit made on the node is put back (a declared change restarts it through its Service).")
}

func (f *FileState) Annotate(a infer.Annotator) {
	a.Describe(&f.Sha256, "The SHA-256 of the file on the node (empty when absent).")
	a.Describe(&f.LiveMode, "The file's permission bits on the node.")
}

func (n *NetplanArgs) Annotate(a infer.Annotator) {
	a.Describe(&n.Connection, "How the node is reached.")
	a.Describe(&n.Content, "homelab's netplan file, /etc/netplan/60-homelab.yaml.")
	a.Describe(&n.Interface, "The interface the file declares the address on (nodes[].interface).")
	a.Describe(&n.MAC, "The MAC the file matches the interface by (nodes[].mac; empty: by name).")
	a.Describe(&n.Address, "The static address with its prefix length, checked on the interface after an apply.")
	a.Describe(&n.Endpoint, "The API endpoint (host:port) on the vip layout's control-plane nodes: the node holding the VIP hands it over before an apply, as systemd-networkd drops addresses it did not configure.")
}

func (n *NetplanState) Annotate(a infer.Annotator) {
	a.Describe(&n.Installed, "Whether the node has netplan, read live; without it the file is written and nothing reads it.")
	a.Describe(&n.Sha256, "The SHA-256 of the file on the node (empty when absent).")
	a.Describe(&n.Competing, "Other files in /etc/netplan that configure the interface, read live: the next up moves them aside (renamed *.homelab-disabled).")
	a.Describe(&n.Unresolved, "Other files that configure the interface beside other devices, read live, each with its fix: the up refuses until they are edited.")
}

func (s *ServiceArgs) Annotate(a infer.Annotator) {
	a.Describe(&s.Connection, "How the node is reached.")
	a.Describe(&s.Name, "The systemd unit, e.g. keepalived.")
	a.Describe(&s.Trigger, "A checksum of the files the unit reads: when it changes, the unit is restarted.")
	a.Describe(&s.KeepRunning, "Leave the unit enabled and running when this resource is deleted (the container runtime handed back to the user).")
	a.Describe(&s.ControlPlane, "On a control-plane node's containerd: after each restart, wait until the node's etcd member and apiserver are healthy again.")
}

func (c *ServiceControlPlane) Annotate(a infer.Annotator) {
	a.Describe(&c, "Where a control-plane node's etcd member and apiserver answer, waited for after its containerd restarts.")
	a.Describe(&c.Address, "The node's address, where its apiserver and etcd member answer.")
	a.Describe(&c.Port, "The apiserver's port.")
	a.Describe(&c.Endpoint, "The controlPlaneEndpoint (host:port), through which the API must answer too.")
}

func (s *ServiceState) Annotate(a infer.Annotator) {
	a.Describe(&s.Enabled, "Whether the unit is enabled, read live.")
	a.Describe(&s.Active, "Whether the unit is running, read live.")
}

func (r *AptRepository) Annotate(a infer.Annotator) {
	a.Describe(&r, "A third-party apt repository trusted through its own signed-by keyring.")
	a.Describe(&r.KeyURL, "Where the repository's signing key is fetched from (when key is empty).")
	a.Describe(&r.Key, "The repository's signing key as a dearmored keyring, base64: uploaded to keyring instead of fetched.")
	a.Describe(&r.Keyring, "Where the dearmored key is kept on the node.")
	a.Describe(&r.SourcesPath, "The apt sources list file for the repository.")
	a.Describe(&r.Sources, "The sources list's content, naming the keyring in signed-by.")
}

func (pk *PackageArgs) Annotate(a infer.Annotator) {
	a.Describe(&pk.Connection, "How the node is reached.")
	a.Describe(&pk.Names, "Debian packages installed together at pinnedVersion and held there.")
	a.Describe(&pk.Version, "The apt version every package is pinned to, e.g. 1.20.0-1 (with anyRevision an upstream version, e.g. 1.34.4).")
	a.Describe(&pk.AnyRevision, "pinnedVersion is an upstream version: any Debian revision of it is the pin, the repository's newest installed.")
	a.Describe(&pk.KeepVersion, "When set, an installed package at another version is refused, not changed; the text says what to do instead.")
	a.Describe(&pk.Repository, "The apt repository the packages come from (empty: the node's configured ones).")
	a.Describe(&pk.Restart, "A unit restarted when the installed version or the trigger changes.")
	a.Describe(&pk.Enable, "A unit the packages ship, enabled once they are installed (the kubelet).")
	a.Describe(&pk.Trigger, "A checksum of configuration the restarted unit reads.")
	a.Describe(&pk.RequireNvidiaGPU, "Skip the install, with a warning, on a node where no NVIDIA GPU is detected.")
	a.Describe(&pk.DeclaredGPUs, "How many GPUs the inventory declares on the node (for the warning).")
	a.Describe(&pk.Replaces, "Packages the install takes the place of (they conflict with names): unheld before it, so apt can remove them.")
}

func (pk *PackageState) Annotate(a infer.Annotator) {
	a.Describe(&pk.Versions, "The installed version of each package, read live (empty when absent).")
	a.Describe(&pk.Status, "installed (at the pin and held), not held, not installed, other version, or skipped: no NVIDIA GPU detected.")
	a.Describe(&pk.DetectedGPUs, "How many NVIDIA GPUs the node showed (with requireNvidiaGPU).")
}

func (k *KubeadmInitArgs) Annotate(a infer.Annotator) {
	a.Describe(&k.Connection, "The control-plane node a new cluster is bootstrapped on (the single-ip layout's endpoint node, else the first listed).")
	a.Describe(&k.ConfigPath, "The kubeadm init configuration on the control-plane nodes.")
	a.Describe(&k.ConfigSha, "The SHA-256 of the cluster-wide configuration: a change is uploaded to the cluster (kubeadm-config), never a second init.")
	a.Describe(&k.IgnorePreflight, "kubeadm preflight checks to skip.")
	a.Describe(&k.Peers, "The other control-plane nodes: a cluster running on any of them is the cluster, and one that cannot be checked stops a new init.")
	a.Describe(&k.JoinConfigPath, "No longer used (stacks made by earlier versions hold it).")
	a.Describe(&k.BootstrapToken, "No longer used (stacks made by earlier versions hold it).")
}

func (k *KubeadmInitState) Annotate(a infer.Annotator) {
	a.Describe(&k.Initialized, "Whether the cluster exists (on the bootstrap node or a peer), read live.")
	a.Describe(&k.BootstrappedOn, "The node kubeadm init ran on, recorded then.")
	a.Describe(&k.AdminKubeconfig, "The cluster-admin kubeconfig, /etc/kubernetes/admin.conf (secret).")
	a.Describe(&k.ClusterUID, "The cluster's identity, its kube-system namespace's UID, read where the cluster runs: it changes only when kubeadm init made a new cluster, and the pod network is installed again then.")
	a.Describe(&k.ResetRisk, "When no cluster is found and the bootstrap node holds etcd data without a completion marker: the reset the bootstrap would make (refused without consent for that node; the data moved aside, kept). Empty: none.")
	a.Describe(&k.PartialRepair, "When no cluster is found and the bootstrap node was set up but lacks kubeadm files: what the bootstrap regenerates over its etcd data instead of a reset. Empty: none.")
}

func (k *KubeadmJoinArgs) Annotate(a infer.Annotator) {
	a.Describe(&k.Connection, "The joining node.")
	a.Describe(&k.ConfigPath, "Where the join configuration is written for the join's run, and removed after it.")
	a.Describe(&k.Config, "The node's kubeadm join configuration (secret: it holds the node's token); none for the single-ip layout's endpoint node.")
	a.Describe(&k.ConfigSha, "The configuration's SHA-256; it matters only to a node not yet joined.")
	a.Describe(&k.ControlPlane, "Join as a control-plane member (etcd member, static pods) rather than a worker.")
	a.Describe(&k.IgnorePreflight, "kubeadm preflight checks to skip.")
	a.Describe(&k.Via, "A control-plane node with admin.conf, where the node's token is made and removed and a replaced machine's old Node deleted.")
	a.Describe(&k.BootstrapToken, "The node's own join token (secret), created just before its join and deleted right after.")
	a.Describe(&k.Peers, "The control-plane nodes: etcd is reached through them (a replaced machine's stale member is removed before it joins), and the API when via does not answer.")
}

func (k *KubeadmJoinState) Annotate(a infer.Annotator) {
	a.Describe(&k.Joined, "Whether the node is a member, joined (or initialised) by kubeadm to completion, read live.")
	a.Describe(&k.LiveKubeletClient, "What the node's kubelet.conf authenticates the kubelet with, read live: the certificate file it names (/var/lib/kubelet/pki/kubelet-client-current.pem, which the kubelet rotates), or embedded (client-certificate-data, which nothing rotates).")
	a.Describe(&k.KubeletClientRepair, "What up does about an embedded kubelet client certificate, and why: kubelet.conf pointed at the rotating file (the embedded pair stored there first when it has none the node can use), then the kubelet restarted. Empty: nothing to do.")
	a.Describe(&k.KubeletClientProblem, "Why up leaves an embedded kubelet client certificate as it is: neither it nor the rotating file can authenticate the node (expired, another CA's, another node's). Empty: none.")
	a.Describe(&k.ResetRisk, "When the node is a control-plane node kubeadm left half set up holding etcd data: the reset its join may make (the data moved aside, kept; refused without consent where it may be the only copy). Empty: none.")
}

func (t *Taint) Annotate(a infer.Annotator) {
	a.Describe(&t, "A Node taint.")
	a.Describe(&t.Key, "The taint's key.")
	a.Describe(&t.Value, "The taint's value (may be empty).")
	a.Describe(&t.Effect, "NoSchedule, PreferNoSchedule or NoExecute.")
}

func (n *NodeMetaArgs) Annotate(a infer.Annotator) {
	a.Describe(&n.Via, "A control-plane node with admin.conf.")
	a.Describe(&n.Node, "The Node's name.")
	a.Describe(&n.Labels, "Labels the Node must carry.")
	a.Describe(&n.Taints, "Taints the Node must carry.")
	a.Describe(&n.Machine, "The node's host key fingerprints as known_hosts has them: a new machine registers a new Node, so the labels are applied again.")
}

func (n *NodeMetaState) Annotate(a infer.Annotator) {
	a.Describe(&n.LiveLabels, "The managed labels' values on the Node, read live.")
	a.Describe(&n.LiveTaints, "The managed taints on the Node, read live.")
}

func (m *ManifestArgs) Annotate(a infer.Annotator) {
	a.Describe(&m.Via, "A control-plane node with admin.conf.")
	a.Describe(&m.Kind, "The object's kind as kubectl names it, e.g. runtimeclass.")
	a.Describe(&m.Name, "The object's name.")
	a.Describe(&m.Namespace, "The object's namespace (empty for cluster-scoped kinds).")
	a.Describe(&m.Content, "The object as YAML.")
}

func (m *ManifestState) Annotate(a infer.Annotator) {
	a.Describe(&m.Exists, "Whether the object exists, read live.")
}

func (e *EtcdMember) Annotate(a infer.Annotator) {
	a.Describe(&e, "An etcd member.")
	a.Describe(&e.Name, "The member's name (its node's).")
	a.Describe(&e.PeerURL, "The member's peer URL, https://ADDRESS:2380.")
}

func (e *EtcdMembersArgs) Annotate(a infer.Annotator) {
	a.Describe(&e.Via, "Control-plane nodes etcd is reached through (an SSH tunnel to its loopback client port); the first that answers is used.")
	a.Describe(&e.Members, "The members etcd must have: one per control-plane node, with its peer URL.")
}

func (e *EtcdMembersState) Annotate(a infer.Annotator) {
	a.Describe(&e.Live, "etcd's member list, read live.")
}

func (d *DataplaneArgs) Annotate(a infer.Annotator) {
	a.Describe(&d.Via, "The bootstrap node (the single-ip layout's endpoint node, else the first control-plane node listed): admin.conf, kubeadm and the init configuration are there.")
	a.Describe(&d.Nodes, "Every node, whose KUBE-* rules are removed once kube-proxy is gone.")
	a.Describe(&d.Replacement, "none (kube-proxy runs) or cilium (Cilium's eBPF kube-proxy replacement).")
	a.Describe(&d.CNI, "The pod network: cilium (installed here; empty means cilium) or none (the user brings one).")
	a.Describe(&d.ClusterUID, "The cluster's identity (KubeadmInit's clusterUID): a cluster made anew gets its pod network installed again.")
	a.Describe(&d.InitConfigPath, "kubeadm's init configuration on via, from which kube-proxy is restored.")
	a.Describe(&d.Values, "The Cilium release's values (YAML).")
	a.Describe(&d.Chart, "A Cilium chart archive on the machine running the provider (empty: the official repository).")
	a.Describe(&d.ChartSha, "The chart archive's SHA-256: a rebuilt archive at the same path is a new chart.")
	a.Describe(&d.ChartRepo, "The chart repository's URL.")
	a.Describe(&d.ChartName, "The chart's name in the repository.")
	a.Describe(&d.ChartVersion, "The chart's version.")
	a.Describe(&d.Release, "The Helm release's name.")
	a.Describe(&d.Namespace, "The Helm release's namespace.")
	a.Describe(&d.TimeoutSec, "How long each wait may take, in seconds.")
	a.Describe(&d.Wait, "No longer used (stacks made by earlier versions hold it).")
}

func (d *DataplaneState) Annotate(a infer.Annotator) {
	a.Describe(&d.KubeProxy, "Whether the kube-proxy DaemonSet or ConfigMap exists, read live.")
	a.Describe(&d.ReleasePresent, "Whether the Cilium release is installed, read live.")
	a.Describe(&d.ReleaseChart, "The installed release's chart and version.")
	a.Describe(&d.ReleaseValues, "The installed release's values.")
	a.Describe(&d.StaleRules, "Nodes still holding kube-proxy's rules while Cilium replaces it.")
	a.Describe(&d.NetworkNotReady, "Declared nodes whose Ready condition says their runtime has no pod network (its CNI configuration gone), read live.")
}

func (c *ControlPlaneAddressArgs) Annotate(a infer.Annotator) {
	a.Describe(&c.Connection, "The control-plane node.")
	a.Describe(&c.Address, "The node's declared address, which its etcd and apiserver must bind and advertise.")
	a.Describe(&c.APIServerSANs, "The SANs the apiserver certificate must cover (every address and name the API is reached by).")
	a.Describe(&c.EtcdSANs, "The SANs etcd's server and peer certificates must cover.")
	a.Describe(&c.ConfigPath, "The node's kubeadm init configuration, which the phases that regenerate its certificates and manifests read (default /etc/kubernetes/kubeadm/init.yaml).")
	a.Describe(&c.Config, "No longer used (stacks made by earlier versions hold it).")
	a.Describe(&c.Port, "The apiserver's port.")
	a.Describe(&c.ComponentArgs, "Flags each control-plane static pod must run with (name=value), by pod name.")
	a.Describe(&c.RenewBefore, "How long before its expiry a certificate of the node is renewed (a Go duration, the inventory's cluster.certificates.renewBefore; default 720h). HOMELAB_RENEW_CERTIFICATES=NODE renews them all in that run.")
	a.Describe(&c.Endpoint, "The controlPlaneEndpoint (host:port): after a renewal the API must answer /readyz through it as well as on the node.")
}

func (c *ControlPlaneAddressState) Annotate(a infer.Annotator) {
	a.Describe(&c.LiveAdvertise, "The apiserver's advertise address, read live.")
	a.Describe(&c.LiveEtcdPeer, "The address etcd listens on for peers, read live.")
	a.Describe(&c.LiveNodeIP, "The kubelet's node IP, read live.")
	a.Describe(&c.LiveKubeconfig, "The server of each kubeconfig the node's own components use, read live.")
	a.Describe(&c.LiveSANs, "Each certificate's SANs, read live.")
	a.Describe(&c.LiveArgs, "The declared flags' live values, by pod/flag (absent: the manifest lacks the flag).")
	a.Describe(&c.LiveExpiry, "When each certificate kubeadm issued on the node expires (RFC 3339), read live, by name (apiserver.crt, etcd/peer.crt, admin.conf, ...); one within renewBefore is renewed.")
}

func (r *ControlPlaneRevivalArgs) Annotate(a infer.Annotator) {
	a.Describe(&r.Nodes, "Every control-plane node's connection, whose certificates are read; its host is the node's declared address, at which its apiserver must answer /readyz with a certificate valid for it. Which nodes is a means, no change.")
	a.Describe(&r.ConfigPath, "The nodes' kubeadm init configuration, from which their certificates are issued again (the inventory's SANs and validity).")
	a.Describe(&r.Port, "The apiserver's port.")
	a.Describe(&r.RenewBefore, "How long before its expiry a certificate is due (a Go duration, the inventory's cluster.certificates.renewBefore; default 720h): a revival renews every due certificate of the nodes it revives.")
	a.Describe(&r.Endpoint, "The controlPlaneEndpoint (host:port), through which the API must answer /readyz again.")
}

func (r *ControlPlaneRevivalState) Annotate(a infer.Annotator) {
	a.Describe(&r.LiveExpiry, "When each certificate kubeadm issued on each control-plane node expires (RFC 3339), read live, by node, then by name (apiserver.crt, etcd/peer.crt, admin.conf, ...).")
}

func (k *KubeletServingArgs) Annotate(a infer.Annotator) {
	a.Describe(&k.Connection, "How the node is reached.")
	a.Describe(&k.Via, "A control-plane node with admin.conf, where the node's CSRs are read and approved.")
	a.Describe(&k.Node, "The node's name in the inventory: its kubelet's user is system:node:NAME, and NAME the one DNS name its certificate may carry.")
	a.Describe(&k.Address, "The node's declared address (the kubelet's node IP): the one IP address its serving certificate may name.")
}

func (k *KubeletServingState) Annotate(a infer.Annotator) {
	a.Describe(&k.LiveBootstrap, "Whether the kubelet's configuration has serverTLSBootstrap on, read live.")
	a.Describe(&k.LiveCertificate, "The certificate the kubelet serves with (PEM, without its key), read live; empty when it has none from the cluster CA.")
	a.Describe(&k.LiveCA, "The cluster CA certificate the node holds, read live.")
	a.Describe(&k.LivePending, "The node's pending serving CSRs that up would approve, read live.")
}

func (k *KubeadmImagesArgs) Annotate(a infer.Annotator) {
	a.Describe(&k.Connection, "How the control-plane node is reached.")
	a.Describe(&k.ConfigPath, "The node's kubeadm init configuration, which names the images (kubeadm config images pull --config).")
	a.Describe(&k.KubernetesVersion, "The declared Kubernetes version: a new one pulls its images again.")
	a.Describe(&k.IgnorePreflight, "kubeadm's preflight errors to ignore: with ImagePull (or all) among them the pull is left to the user, as kubeadm leaves it.")
}

func (k *KubeadmImagesState) Annotate(a infer.Annotator) {
	a.Describe(&k.Pulled, "The images kubeadm reported pulled, by reference; empty when the pull was left to the user.")
}
