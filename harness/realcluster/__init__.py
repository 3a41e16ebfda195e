"""A real Kubernetes control plane (etcd, kube-apiserver, controllers, KWOK, Kueue, JobSet)
built from pinned Go modules, for the real test tier and a demo on real binaries."""
