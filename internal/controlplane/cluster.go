// Package controlplane builds, starts and stops a local Kubernetes control
// plane: one etcd and one kube-apiserver on loopback, no nodes, and, only when
// asked, a kube-controller-manager that runs garbage collection and namespace
// deletion. kctl's own tests, the kctltest package and hack/controlplane share it;
// it does not import kctl, so kctl's internal tests can use it too.
package controlplane

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Cluster is one etcd and one kube-apiserver on loopback, with every file
// (certificates, tokens, etcd's data, logs, kubeconfigs) in Dir. Set Dir and
// Bin, then Up starts it and Down stops it; RestartAPIServer may run
// concurrently with both. Unless Detach is set, the processes die with this
// one, however it ends (see spawn).
type Cluster struct {
	Dir    string    // the cluster's files
	Bin    string    // holds etcd and kube-apiserver
	Detach bool      // processes outlive this one (hack/controlplane start)
	Log    io.Writer // gets "ready in" lines; nil: none
	// APIFlags are added to kube-apiserver's command line, after kctl's own,
	// e.g. "--feature-gates=ShardedListAndWatch=true"; nil: none.
	APIFlags []string
	// ControllerManager also starts kube-controller-manager (from Bin; see
	// ControllerManager for its build) running only its garbage collector
	// and namespace controller: owner references cascade and a deleted
	// namespace empties and goes, as in a cluster, while no other controller
	// acts on the tests' objects (no ReplicaSet makes Pods).
	ControllerManager bool
	// Reaper, if set, learns of every process started and stopped, to kill
	// those left and remove Dir if this process dies (see Reaper).
	Reaper *Reaper

	EtcdURL string // etcd's client URL, set by Up
	APIURL  string // kube-apiserver's URL, set by Up

	apiArgs    []string
	adminToken string
	caPEM      []byte
	client     *http.Client // trusts caPEM

	restartMu sync.Mutex // one restart at a time
	mu        sync.Mutex // guards etcd, api, stopped and ports
	etcd, api *proc
	kcm       *proc // kube-controller-manager; nil unless ControllerManager
	stopped   bool  // down was called: start nothing more
	// ports are etcd's client and peer ports and kube-apiserver's, held
	// until Down: a restarted kube-apiserver binds its port again.
	ports *Ports
}

// proc is a started etcd, kube-apiserver or kube-controller-manager. done is closed once it has exited.
type proc struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
}

func (c *Cluster) file(name string) string { return filepath.Join(c.Dir, name) }

// Kubeconfig is the path of the admin's kubeconfig (group system:masters).
func (c *Cluster) Kubeconfig() string { return c.file("kubeconfig") }

// UnprivilegedKubeconfig is the path of a kubeconfig for user
// "kctl-unprivileged", in no group, whom RBAC lets do next to nothing.
func (c *Cluster) UnprivilegedKubeconfig() string { return c.file("unprivileged.kubeconfig") }

// Env is what a command needs to use the cluster, as NAME=value.
func (c *Cluster) Env() []string {
	return []string{"KUBECONFIG=" + c.Kubeconfig(), "KCTL_TEST_KUBECONFIG=" + c.Kubeconfig(),
		"KCTL_TEST_UNPRIVILEGED_KUBECONFIG=" + c.UnprivilegedKubeconfig(), "KCTL_TEST_ETCD_URL=" + c.EtcdURL}
}

// PIDs returns the process IDs of kube-controller-manager (if it runs),
// kube-apiserver and etcd, in stop order.
func (c *Cluster) PIDs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var pids []int
	if c.kcm != nil {
		pids = append(pids, c.kcm.cmd.Process.Pid)
	}
	return append(pids, c.api.cmd.Process.Pid, c.etcd.cmd.Process.Pid)
}

// Up writes the credentials, starts etcd and then kube-apiserver, waits until
// both are ready, and writes the kubeconfigs; then, if ControllerManager is
// set, starts kube-controller-manager and waits for its /healthz. On error,
// call Down.
func (c *Cluster) Up(ctx context.Context) error {
	start := time.Now()
	held, err := ReservePorts(4)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.ports = held
	c.mu.Unlock()
	ports := held.Ports
	unprivilegedToken := randomToken()
	c.adminToken = randomToken()
	if err := c.writeCredentials(unprivilegedToken); err != nil {
		return fmt.Errorf("cannot write the control plane's credentials: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.caPEM)
	c.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	c.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	c.etcd, err = c.spawn("etcd", "--name=kctl", "--data-dir="+c.file("etcd"),
		"--listen-client-urls="+c.EtcdURL, "--advertise-client-urls="+c.EtcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL, "--initial-cluster=kctl="+peerURL,
		"--unsafe-no-fsync", "--log-level=warn") // no fsync: a test cluster need not survive a power cut
	if err == nil {
		err = c.waitReady(ctx, c.etcd, c.EtcdURL+"/health")
	}
	if err != nil {
		return err
	}

	c.APIURL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	c.apiArgs = []string{"--etcd-servers=" + c.EtcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[2]),
		"--tls-cert-file=" + c.file("serving.crt"), "--tls-private-key-file=" + c.file("serving.key"),
		"--token-auth-file=" + c.file("tokens.csv"), "--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.file("sa.pub"), "--service-account-signing-key-file=" + c.file("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
		// No controller-manager creates the "default" ServiceAccount of a namespace, and
		// this admission plugin would reject every pod that refers to it.
		"--disable-admission-plugins=ServiceAccount"}
	c.apiArgs = append(c.apiArgs, c.APIFlags...)
	if err := c.startAPIServer(ctx); err != nil {
		return err
	}
	if err := errors.Join(c.writeKubeconfig(c.Kubeconfig(), "kctl-admin", c.adminToken),
		c.writeKubeconfig(c.UnprivilegedKubeconfig(), "kctl-unprivileged", unprivilegedToken)); err != nil {
		return err
	}
	if c.ControllerManager {
		if err := c.startControllerManager(ctx, ports[3]); err != nil {
			return err
		}
	}
	if c.Log != nil {
		fmt.Fprintf(c.Log, "controlplane: ready in %.1f s: kube-apiserver %s, etcd %s, files in %s\n",
			time.Since(start).Seconds(), c.APIURL, c.EtcdURL, c.Dir)
	}
	return nil
}

// startAPIServer starts kube-apiserver and waits for /readyz.
func (c *Cluster) startAPIServer(ctx context.Context) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return errors.New("the control plane is stopping")
	}
	api, err := c.spawn("kube-apiserver", c.apiArgs...)
	c.api = api
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.waitReady(ctx, api, c.APIURL+"/readyz")
}

// startControllerManager starts kube-controller-manager as the admin, with
// only the garbage collector and the namespace controller, serving /healthz
// on port with kube-apiserver's serving certificate (made for loopback), and
// waits until it answers.
func (c *Cluster) startControllerManager(ctx context.Context, port int) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return errors.New("the control plane is stopping")
	}
	kcm, err := c.spawn(ControllerManagerBinary, "--kubeconfig="+c.Kubeconfig(),
		"--controllers=garbage-collector-controller,namespace-controller", "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+c.file("serving.crt"), "--tls-private-key-file="+c.file("serving.key"))
	c.kcm = kcm
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.waitReady(ctx, kcm, fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
}

// RestartAPIServer kills kube-apiserver (SIGKILL, as in a crash) and starts
// it again on the same port: clients see their connections, watches included, break.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	c.restartMu.Lock()
	defer c.restartMu.Unlock()
	c.mu.Lock()
	api := c.api
	c.mu.Unlock()
	if api == nil {
		return errors.New("kube-apiserver is not running")
	}
	StopPID(api.cmd.Process.Pid, api.exited, 0)
	c.Reaper.Forget(api.cmd.Process.Pid)
	return c.startAPIServer(ctx)
}

// Down stops kube-controller-manager (if it runs), kube-apiserver, then
// etcd. The caller removes Dir.
func (c *Cluster) Down() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for _, p := range []*proc{c.kcm, c.api, c.etcd} {
		if p != nil {
			StopPID(p.cmd.Process.Pid, p.exited, 5*time.Second)
			c.Reaper.Forget(p.cmd.Process.Pid)
		}
	}
	c.kcm = nil
	c.api = nil
	c.etcd = nil
	if c.ports != nil {
		c.ports.Release()
	}
}

// spawn starts one binary with its output in Dir/NAME.log, in a process
// group of its own, so a Ctrl-C in the terminal does not reach it: the process
// that started it stops the cluster in order. Unless Detach is set, the kernel
// kills it when this process dies (see startDying).
func (c *Cluster) spawn(name string, args ...string) (*proc, error) {
	p := &proc{name: name, log: c.file(name + ".log"), done: make(chan struct{})}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p.cmd = exec.Command(filepath.Join(c.Bin, name), args...)
	p.cmd.Stdout = logf
	p.cmd.Stderr = logf
	if c.Detach {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = p.cmd.Start()
	} else {
		err = startDying(p.cmd)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", name, err)
	}
	c.Reaper.Watch(p.cmd.Process.Pid) // it leads its process group
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitReady polls url (with the admin token) until it answers 200 OK. If p
// exits or 2 minutes pass first, it returns an error with the end of p's log.
// (Starting takes about 4 s, much longer on a loaded machine.)
func (c *Cluster) waitReady(ctx context.Context, p *proc, url string) error {
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+c.adminToken)
		resp, err := c.client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status + ": " + string(body)
		} else {
			last = err.Error()
		}
		var why string
		select {
		case <-p.done:
			why = "exited (" + p.cmd.ProcessState.String() + ")"
		case <-ctx.Done():
			return fmt.Errorf("%s: start interrupted", p.name)
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				why = "is not ready after 2 minutes; last answer of " + url + ": " + last
			}
		}
		if why != "" {
			return fmt.Errorf("%s failed to start: it %s\n--- last 30 lines of %s ---\n%s", p.name, why, p.log, tail(p.log, 30))
		}
	}
}

// StopPID sends SIGTERM to the process group that pid leads, and SIGKILL if
// exited has not turned true after grace (at once if grace is 0).
func StopPID(pid int, exited func() bool, grace time.Duration) {
	sig := syscall.SIGTERM
	kill := time.Now().Add(grace)
	if grace == 0 {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-pid, sig)
	giveUp := kill.Add(5 * time.Second)
	for !exited() && time.Now().Before(giveUp) {
		if sig == syscall.SIGTERM && time.Now().After(kill) {
			sig = syscall.SIGKILL
			syscall.Kill(-pid, sig)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Alive tells whether pid runs and is not a zombie (a zombie waits for a
// parent to collect its status, and PID 1 may never do that).
func Alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func randomToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// writeCredentials writes a CA and a serving certificate it signed for
// loopback (serving.crt, serving.key), the service-account key pair (sa.key,
// sa.pub) and the static token file: an admin in system:masters, and
// "kctl-unprivileged" in no group, whom RBAC lets do next to nothing.
func (c *Cluster) writeCredentials(unprivilegedToken string) error {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kctl-controlplane-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err = x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	servingKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serving := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	servingDER, err := x509.CreateCertificate(rand.Reader, serving, ca, &servingKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	servingKeyDER, err1 := x509.MarshalPKCS8PrivateKey(servingKey)
	saKeyDER, err2 := x509.MarshalPKCS8PrivateKey(saKey)
	saPubDER, err3 := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	c.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	tokens := fmt.Sprintf("%s,kctl-admin,kctl-admin,\"system:masters\"\n%s,kctl-unprivileged,kctl-unprivileged\n",
		c.adminToken, unprivilegedToken)
	return errors.Join(err1, err2, err3,
		writePEM(c.file("serving.crt"), "CERTIFICATE", servingDER, caDER),
		writePEM(c.file("serving.key"), "PRIVATE KEY", servingKeyDER),
		writePEM(c.file("sa.key"), "PRIVATE KEY", saKeyDER),
		writePEM(c.file("sa.pub"), "PUBLIC KEY", saPubDER),
		os.WriteFile(c.file("tokens.csv"), []byte(tokens), 0o600))
}

func writePEM(path, typ string, ders ...[]byte) error {
	var b []byte
	for _, der := range ders {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})...)
	}
	return os.WriteFile(path, b, 0o600)
}

// WriteKubeconfig writes the admin's kubeconfig to path.
func (c *Cluster) WriteKubeconfig(path string) error {
	return c.writeKubeconfig(path, "kctl-admin", c.adminToken)
}

// writeKubeconfig writes a kubeconfig for user with token to path. It verifies
// the serving certificate against the CA (no insecure-skip-tls-verify).
func (c *Cluster) writeKubeconfig(path, user, token string) error {
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kctl
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: kctl
  context:
    cluster: kctl
    user: %s
current-context: kctl
`, c.APIURL, base64.StdEncoding.EncodeToString(c.caPEM), user, token, user)
	return os.WriteFile(path, []byte(kubeconfig), 0o600)
}
