package main

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

// cluster is one etcd and one kube-apiserver on loopback, with every file
// (certificates, tokens, etcd's data, logs, kubeconfigs) in dir.
// up starts it, down stops it; restartAPIServer may run concurrently with both.
type cluster struct {
	dir    string // the cluster's files
	bin    string // holds etcd and kube-apiserver
	detach bool   // processes outlive this one (start), else they die with it (run)

	etcdURL, apiURL string
	apiArgs         []string
	adminToken      string
	caPEM           []byte
	client          *http.Client // trusts caPEM

	restartMu sync.Mutex // one restart at a time
	mu        sync.Mutex // guards etcd, api and stopped
	etcd, api *proc
	stopped   bool // down was called: start nothing more
}

// proc is a started etcd or kube-apiserver. done is closed once it has exited.
type proc struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
}

func (c *cluster) file(name string) string { return filepath.Join(c.dir, name) }
func (c *cluster) kubeconfig() string      { return c.file("kubeconfig") }

// env is what a command needs to use the cluster, as NAME=value.
func (c *cluster) env() []string {
	return []string{"KUBECONFIG=" + c.kubeconfig(), "KCTL_TEST_KUBECONFIG=" + c.kubeconfig(),
		"KCTL_TEST_UNPRIVILEGED_KUBECONFIG=" + c.file("unprivileged.kubeconfig"), "KCTL_TEST_ETCD_URL=" + c.etcdURL}
}

// up writes the credentials, starts etcd and then kube-apiserver, waits until
// both are ready, and writes the kubeconfigs. On error, call down.
func (c *cluster) up(ctx context.Context) error {
	start := time.Now()
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	unprivilegedToken := randomToken()
	c.adminToken = randomToken()
	if err := c.writeCredentials(unprivilegedToken); err != nil {
		return fmt.Errorf("cannot write the control plane's credentials: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.caPEM)
	c.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	c.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	c.etcd, err = c.spawn("etcd", "--name=kctl", "--data-dir="+c.file("etcd"),
		"--listen-client-urls="+c.etcdURL, "--advertise-client-urls="+c.etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL, "--initial-cluster=kctl="+peerURL,
		"--unsafe-no-fsync", "--log-level=warn") // no fsync: a test cluster need not survive a power cut
	if err == nil {
		err = c.waitReady(ctx, c.etcd, c.etcdURL+"/health")
	}
	if err != nil {
		return err
	}

	c.apiURL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	c.apiArgs = []string{"--etcd-servers=" + c.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[2]),
		"--tls-cert-file=" + c.file("serving.crt"), "--tls-private-key-file=" + c.file("serving.key"),
		"--token-auth-file=" + c.file("tokens.csv"), "--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.file("sa.pub"), "--service-account-signing-key-file=" + c.file("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
		// No controller-manager creates the "default" ServiceAccount of a namespace, and
		// this admission plugin would reject every pod that refers to it.
		"--disable-admission-plugins=ServiceAccount"}
	if err := c.startAPIServer(ctx); err != nil {
		return err
	}
	if err := errors.Join(c.writeKubeconfig(c.kubeconfig(), "kctl-admin", c.adminToken),
		c.writeKubeconfig(c.file("unprivileged.kubeconfig"), "kctl-unprivileged", unprivilegedToken)); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "controlplane: ready in %.1f s: kube-apiserver %s, etcd %s, files in %s\n",
		time.Since(start).Seconds(), c.apiURL, c.etcdURL, c.dir)
	return nil
}

// startAPIServer starts kube-apiserver and waits for /readyz.
func (c *cluster) startAPIServer(ctx context.Context) error {
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
	return c.waitReady(ctx, api, c.apiURL+"/readyz")
}

// restartAPIServer kills kube-apiserver (SIGKILL, as in a crash) and starts
// it again on the same port: clients see their connections, watches included, break.
func (c *cluster) restartAPIServer(ctx context.Context) error {
	c.restartMu.Lock()
	defer c.restartMu.Unlock()
	c.mu.Lock()
	api := c.api
	c.mu.Unlock()
	if api == nil {
		return errors.New("kube-apiserver is not running")
	}
	stopPID(api.cmd.Process.Pid, api.exited, 0)
	return c.startAPIServer(ctx)
}

// down stops kube-apiserver, then etcd. In run mode the caller removes dir.
func (c *cluster) down() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for _, p := range []*proc{c.api, c.etcd} {
		if p != nil {
			stopPID(p.cmd.Process.Pid, p.exited, 5*time.Second)
		}
	}
	c.api, c.etcd = nil, nil
}

// spawn starts one binary with its output in dir/NAME.log. Its process group
// is its own, so a Ctrl-C in the terminal reaches only the runner, which stops
// the cluster in order. Unless detached, the kernel kills it when this process
// dies (Pdeathsig); Go never ends the OS thread that started it, which would
// trigger Pdeathsig too, as long as no goroutine locks a thread and exits.
func (c *cluster) spawn(name string, args ...string) (*proc, error) {
	p := &proc{name: name, log: c.file(name + ".log"), done: make(chan struct{})}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p.cmd = exec.Command(filepath.Join(c.bin, name), args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if c.detach {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", name, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
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
func (c *cluster) waitReady(ctx context.Context, p *proc, url string) error {
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

// stopPID sends SIGTERM to the process group that pid leads, and SIGKILL if
// exited has not turned true after grace (at once if grace is 0).
func stopPID(pid int, exited func() bool, grace time.Duration) {
	sig, kill := syscall.SIGTERM, time.Now().Add(grace)
	if grace == 0 {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-pid, sig)
	for giveUp := kill.Add(5 * time.Second); !exited() && time.Now().Before(giveUp); time.Sleep(20 * time.Millisecond) {
		if sig == syscall.SIGTERM && time.Now().After(kill) {
			sig = syscall.SIGKILL
			syscall.Kill(-pid, sig)
		}
	}
}

// alive tells whether pid runs and is not a zombie (a zombie waits for a
// parent to collect its status, and PID 1 may never do that).
func alive(pid int) bool {
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

// freePorts returns n distinct ports on 127.0.0.1 that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("no free port on 127.0.0.1: %w", err)
		}
		defer ln.Close() // held until all are chosen, so they differ
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
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
func (c *cluster) writeCredentials(unprivilegedToken string) error {
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
	if ca, err = x509.ParseCertificate(caDER); err != nil {
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

// writeKubeconfig writes a kubeconfig for user with token to path. It verifies
// the serving certificate against the CA (no insecure-skip-tls-verify).
func (c *cluster) writeKubeconfig(path, user, token string) error {
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
`, c.apiURL, base64.StdEncoding.EncodeToString(c.caPEM), user, token, user)
	return os.WriteFile(path, []byte(kubeconfig), 0o600)
}
