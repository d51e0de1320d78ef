package ginkgotest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gadget is the Go side of ../testdata/gadget-crd.yaml.
type gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Size int `json:"size"`
	} `json:"spec"`
	Status struct {
		Seen int64 `json:"seen,omitempty"`
	} `json:"status,omitzero"`
}

var _ = kctl.Declare[gadget](kctl.Resource{Group: "kctltest.kctl.dev", Version: "v1", Kind: "Gadget", Namespaced: true})

// The control plane is the test binary's; its CRDs are applied once, in
// Main's suite-level setup.
func TestMain(m *testing.M) {
	os.Exit(kctltest.Main(m, func(t kctltest.TB, env *kctltest.Env) error {
		env.Apply(t, "../testdata/gadget-crd.yaml")
		return nil
	}))
}

func TestGinkgo(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kctltest with Ginkgo")
}

var env *kctltest.Env

var _ = BeforeSuite(func() {
	env = kctltest.Start(GinkgoT())
})

// setup is a scaffolded SetupWithManager: it returns an error.
func setup(mgr *kctl.Manager) error {
	gadgets := kctl.ClientFor[gadget](mgr)
	kctl.NewController(mgr, "gadgets", func(ctx context.Context, g *gadget) (kctl.Result, error) {
		kctl.LoggerFrom(ctx).Info("seen", "generation", g.Generation)
		g.Status.Seen = g.Generation
		return kctl.Result{}, gadgets.UpdateStatus(ctx, g)
	})
	return nil
}

var _ = Describe("the gadget controller", func() {
	var ns string
	var run *kctltest.RunningManager
	var gadgets *kctl.Client[gadget]

	BeforeEach(func() {
		ns = env.Namespace(GinkgoT()) // deleted after the spec
		opts := kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}
		run = env.StartManager(GinkgoT(), opts, setup) // stopped after the spec
		gadgets = kctl.NewClient[gadget](env.Conn)
	})

	It("records the generation it saw", func(ctx SpecContext) {
		g := &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}
		Expect(gadgets.Create(ctx, g)).To(Succeed())
		Eventually(func(g Gomega) {
			got, err := gadgets.Get(ctx, ns, "a")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Status.Seen).To(BeEquivalentTo(1))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		// The status is visible once the reconcile's write returns, a moment
		// before the reconcile returns and is counted: wait for the count too.
		Eventually(func() map[string]int { return run.Reconciles(GinkgoT(), "gadgets") }).
			WithTimeout(30 * time.Second).Should(HaveKeyWithValue("success", BeNumerically(">=", 1)))
	})

	It("reconciles nothing while stopped, and catches up when started again", func(ctx SpecContext) {
		run.Stop(GinkgoT())
		Expect(gadgets.Create(ctx, &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}})).To(Succeed())
		Consistently(func(g Gomega) {
			got, err := gadgets.Get(ctx, ns, "b")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Status.Seen).To(BeZero())
		}).WithTimeout(time.Second).Should(Succeed())
		run.Start(GinkgoT())
		kctltest.WaitFor(GinkgoT(), gadgets, ns, "b", func(g *gadget) bool { return g != nil && g.Status.Seen == 1 })
	})
})
