// Package kctltest runs a controller's tests against a real API server, or
// one in memory (StartInMemory), from any module that requires kctl, with
// nothing installed but Go. It is to kctl
// what net/http/httptest is to net/http: test code only, never linked into a
// production binary.
//
//	func TestMain(m *testing.M) { os.Exit(kctltest.Main(m)) } // one control plane per test binary
//
//	func TestWidget_GetsItsConfigMap(t *testing.T) {
//		env := kctltest.Start(t)                   // the shared control plane
//		ns := env.Namespace(t)                     // a fresh namespace, deleted at cleanup
//		env.Apply(t, "testdata/widget-crd.yaml")   // files or objects; CRDs are Established on return
//		env.Manager(t, kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}},
//			setup)                                 // running; logs go to the test's output; stopped at cleanup
//		widgets := kctl.NewClient[Widget](env.Conn)
//		widgets.Create(t.Context(), &Widget{...})
//		kctltest.WaitFor(t, widgets, ns, "hello", func(w *Widget) bool { return w != nil && w.Status.Ready })
//	}
//
// # The control plane
//
// Start gives every test of a test binary the same etcd and kube-apiserver,
// started on first use on free loopback ports (about 5 s); each test binary
// (each package) has its own. It has token authentication, RBAC, a
// self-signed serving certificate and the admission plugins of a default
// kube-apiserver but ServiceAccount, and no controller-manager, scheduler or
// nodes: nothing is garbage-collected, namespaces are never finalized, Pods
// never run. Give every test its own namespace (Namespace) and never wait for
// a cascade.
//
// The binaries (kube-apiserver, etcd and kubectl, of the versions this kctl
// pins) are taken from $KCTL_CONTROLPLANE_BIN when it is set, else from the
// per-user cache, os.UserCacheDir()/kctl/..., where the first Start builds them
// from the Go module proxy: several minutes, with a progress line on the
// terminal every 10 s; test binaries started at once wait for one build (a
// file lock). To build them ahead, e.g. in a CI step of its own:
//
//	go run github.com/kctl-dev/kctl/hack/controlplane build
//
// The processes are stopped, and their folder ($TMPDIR/kctl-controlplane-*:
// etcd's data, the private keys, the tokens and the admin's kubeconfig)
// removed, when the tests end (Main). However else the test binary ends (a
// panic, t.Fatal, os.Exit, go test -timeout, SIGINT, SIGTERM, Ctrl-C, or a
// SIGKILL), nothing of them outlives it: no process, no port, no file. They
// run in a process group of their own; on Linux the kernel kills them when
// the test binary dies; and a reaper (a copy of the test binary, in a
// process group of its own, with no output, that waits for the test binary
// to close a pipe) kills what is left and removes the folder. kctltest works
// on Linux and macOS, not Windows.
//
// # In memory
//
// StartInMemory returns an Env of the same shape whose API server is an
// http.Handler in the test process, reached through rest.Config.Transport:
// nothing to build, no process, no port, a fresh server per call in about a
// millisecond. Conn, Config, Namespace, Apply, Delete, Manager,
// StartManager, WaitFor, Eventually and Consistently work as with Start, so
// a test switches by changing one line:
//
//	env := kctltest.StartInMemory(t) // was: kctltest.Start(t)
//
// It serves kctl's data path on the real wire formats and garbage-collects
// as the controller-manager would; StartInMemory's doc lists what it models
// and what it does not (admission webhooks, RBAC, defaults from OpenAPI,
// quotas), which it answers with 501 naming Start. Made inside a
// testing/synctest bubble, the whole Manager runs on the bubble's fake
// clock. InjectError, DropWatches and Compact make it fail as a test needs.
//
// # Helpers
//
// Eventually and WaitFor wait (30 s, or Timeout's) for a state; Consistently
// checks that one holds, or that nothing happens, for a while (3 s, or
// Timeout's). StartManager returns a RunningManager that can be stopped and
// started again, and whose Reconciles counts a controller's reconciles by
// result; its setup returns an error, as a scaffolded SetupWithManager
// does. Env.RestartAPIServer restarts kube-apiserver on the same address
// over the same etcd. Main takes setup functions run once before the tests
// (CRDs, say). Context gives a unit test a context whose kctl.LoggerFrom
// writes to the test.
//
// # With Ginkgo
//
// Every function that takes a test takes a TB, which Ginkgo's GinkgoT() is
// as well as *testing.T. Keep the TestMain that calls Main (the control
// plane must stop after the suite), run the specs from a test function,
// start the Env in BeforeSuite, and pass GinkgoT() wherever a test goes:
// what kctltest registers for cleanup runs after the spec (or the suite)
// that registered it, and a Manager's logs go to the spec's GinkgoWriter.
//
//	func TestMain(m *testing.M) {
//		os.Exit(kctltest.Main(m, func(t kctltest.TB, env *kctltest.Env) error {
//			env.Apply(t, "config/crd/bases/widgets.yaml") // once, before the suite
//			return nil
//		}))
//	}
//
//	func TestControllers(t *testing.T) {
//		RegisterFailHandler(Fail)
//		RunSpecs(t, "Controller Suite")
//	}
//
//	var env *kctltest.Env
//
//	var _ = BeforeSuite(func() { env = kctltest.Start(GinkgoT()) })
//
//	var _ = Describe("the widget controller", func() {
//		var ns string
//		BeforeEach(func() {
//			ns = env.Namespace(GinkgoT()) // deleted after the spec
//			opts := kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}
//			env.StartManager(GinkgoT(), opts, SetupWithManager) // stopped after the spec
//		})
//		It("marks a widget ready", func(ctx SpecContext) {
//			widgets := kctl.NewClient[Widget](env.Conn)
//			Expect(widgets.Create(ctx, &Widget{...})).To(Succeed())
//			kctltest.WaitFor(GinkgoT(), widgets, ns, "hello", func(w *Widget) bool { return w != nil && w.Status.Ready })
//		})
//	})
//
// kctl's module never requires Ginkgo: kctltest/ginkgotest, a module of its
// own that make test runs, is such a suite.
//
// # Failures
//
// When the control plane cannot start, a test that calls Start fails with
// the reason if the environment variable CI is true, and is skipped otherwise,
// with one loud line on the terminal saying why and how to fix it.
//
// # Unit tests without a server
//
// FakeClient is an in-memory stand-in for kctl.Client[T], for a reconcile
// function that reads and writes through a small interface of its own;
// kctl's helpers that write through a client (CreateOrUpdate, CreateOrPatch,
// AddFinalizer, RemoveFinalizer) take it too (kctl.ObjectClient). One Fake
// serves the FakeClients of several types (FakeClientIn). It models merge,
// JSON and strategic merge patches and server-side apply as far as its
// documentation says; InjectError makes a verb fail as a test needs;
// FakeRecorder stands in for kctl's EventRecorder; Context gives the
// reconcile a logger that writes to the test. What it does not model
// (admission, defaulting, garbage collection, watches...) is either
// an error naming Start, or listed in its documentation: test those with
// Start.
package kctltest
