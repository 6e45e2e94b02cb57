package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
)

// namespacedRules reads the rules config/namespaced grants the manager: its ClusterRole's
// (cluster-scoped only) and the first Role's (granted in each watched namespace).
func namespacedRules() (cluster, namespaced []rbacv1.PolicyRule) {
	read := func(file string, into any) {
		docs := configDocs("namespaced", file)
		ExpectWithOffset(2, docs).NotTo(BeEmpty(), file+" is empty")
		ExpectWithOffset(2, yaml.Unmarshal(docs[0], into)).To(Succeed())
	}
	var cr rbacv1.ClusterRole
	read("cluster_role.yaml", &cr)
	var r rbacv1.Role
	read("roles.yaml", &r)
	ExpectWithOffset(1, r.Rules).NotTo(BeEmpty())
	return cr.Rules, r.Rules
}

// The manager with the rights of config/namespaced only (a ClusterRole for what is
// cluster-scoped, a Role in each watched namespace) and --watch-namespaces: every cache it
// starts must stay in the watched namespaces. The workload cache of spec.blackout.rollouts
// listed Deployments, StatefulSets and DaemonSets cluster-wide: refused, it never synced,
// and the controller never started.
var _ = Describe("Watching some namespaces with the namespaced overlay's rights only", func() {
	It("reconciles a job that guards a rollout in its watched namespace", func() {
		watched := newNamespace()
		const user = "namespaced-manager"
		clusterRules, nsRules := namespacedRules()
		name := "namespaced-manager-" + watched
		Expect(k8sClient.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: clusterRules})).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}})).To(Succeed())
		grant(watched, user, "manager", nsRules...)

		restCfg := rest.CopyConfig(cfg)
		restCfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		opts := CacheOptions()
		opts.DefaultNamespaces = map[string]cache.Config{watched: {}}
		startManagerOn(restCfg, clock.RealClock{}, opts, nil, func(r *LockedCronJobReconciler) { r.WatchNamespaces = []string{watched} })

		Expect(k8sClient.Create(ctx, newDeployment(watched, "web"))).To(Succeed())
		job := newJob(watched, "guarded", rarely)
		job.Spec.Blackout = &v1alpha1.BlackoutSpec{Rollouts: []v1alpha1.RolloutRef{{Kind: v1alpha1.KindDeployment, Name: "web"}}}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() string { return blackoutIs(job) }, 30*time.Second).ShouldNot(BeEmpty(), "the job was never reconciled")
	})
})
