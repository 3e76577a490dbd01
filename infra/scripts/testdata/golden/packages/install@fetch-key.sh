# homelab: packages/install
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Installs .Pinned (NAME=VERSION each) from apt and holds .Names there,
# so an unattended upgrade never moves them; then enables the unit
# .Enable, when set. .Replaces, the packages .Names conflict with, are
# unheld first: apt removes a conflicting package, but not a held one.
# With a .Repo, its key is fetched into .Repo.Keyring when the keyring is
# missing and no key was uploaded (.Repo.Fetch), and only its sources
# list (.Repo.Sources, uploaded before) is updated.
export DEBIAN_FRONTEND=noninteractive
if [ ! -s '/etc/apt/keyrings/kubernetes-apt-keyring.gpg' ]; then
	if ! command -v curl >/dev/null || ! command -v gpg >/dev/null; then
		echo "fetching the repository key needs curl and gpg: apt-get install -y curl gnupg" >&2
		exit 1
	fi
	mkdir -p "$(dirname '/etc/apt/keyrings/kubernetes-apt-keyring.gpg')"
	# Fetched to a file first: in a pipe, sh would not notice curl
	# failing and would keep an empty keyring.
	curl -fsSL 'https://pkgs.k8s.io/core:/stable:/v1.34/deb/Release.key' -o '/etc/apt/keyrings/kubernetes-apt-keyring.gpg.asc'
	gpg --dearmor --yes -o '/etc/apt/keyrings/kubernetes-apt-keyring.gpg.tmp' '/etc/apt/keyrings/kubernetes-apt-keyring.gpg.asc'
	rm -f '/etc/apt/keyrings/kubernetes-apt-keyring.gpg.asc'
	mv '/etc/apt/keyrings/kubernetes-apt-keyring.gpg.tmp' '/etc/apt/keyrings/kubernetes-apt-keyring.gpg'
fi
install_pinned() {
	apt-get install -y -q --allow-downgrades --allow-change-held-packages -o Dpkg::Options::=--force-confold 'kubeadm=1.34.4-*' 'kubelet=1.34.4-*' 'kubectl=1.34.4-*'
}
# Only the repository up manages is updated; every other list is kept
# (List-Cleanup=0). A mirror the node cannot reach made each install
# wait a minute on apt's retries, and these packages come from this
# repository alone. Should the install then miss a dependency from the
# system's repositories, they are all updated and the install tried
# again.
apt-get update -q -o Dir::Etc::sourcelist='/etc/apt/sources.list.d/kubernetes.list' -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0
if ! install_pinned; then
	apt-get update -q
	install_pinned
fi
# Holds the packages .Names at their installed versions, so an
# unattended upgrade never moves them. Prints nothing.
apt-mark hold 'kubeadm' 'kubelet' 'kubectl' >/dev/null

systemctl enable 'kubelet'
