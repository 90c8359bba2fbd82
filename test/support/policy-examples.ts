/**
 * Issue 33's four examples as one policy document (policy.json's vocabulary), for the tests that
 * decide them at each depth: the engine, the executor against the policy service, `policy test`.
 */
export const POLICY_EXAMPLES = {
  riskRules: { requireApprovalAtOrAbove: "high", denyAtOrAbove: "never" },
  rules: [
    {
      capability: "filesystem.write_file",
      effect: "deny",
      when: '!(args.path.startsWith("/srv/reports/") && !args.path.contains("/../"))',
      description: "reports only",
    },
    { capability: "github.merge_pull_request", effect: "allow", when: 'args.repository.matches("^sandbox/")', description: "sandbox merges need no person" },
    { capability: "jira.*", effect: "deny", when: '!("support" in principal.roles)' },
    {
      capability: "jira.delete_issue",
      effect: "require_approval",
      channels: ["operator", "console"],
      when: 'now.getHours("Europe/Berlin") < 8 || now.getHours("Europe/Berlin") >= 18',
    },
  ],
};

/** 10:00 in Berlin (UTC+1 in December): inside business hours. */
export const WORKING_HOURS = new Date("2026-12-07T09:00:00Z");
/** 20:00 in Berlin: outside business hours. */
export const EVENING = new Date("2026-12-07T19:00:00Z");
