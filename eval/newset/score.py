#!/usr/bin/env python3
"""Scores `retrysafe check` on the second real-code set (eval/newset/labels.json).

Ten public repositories with webhook and queue handlers, none in ../shared/devset, reviewed
blind from retrysafe's own output (2026-12-06): two reviewers judged findings `real`, `false`
or `debatable`, and noted some `missed` defects. Unlike the devset, the labels judge the
findings of one version (0.2.0 at 5973f24), so a finding a later version adds is `unjudged`
until someone reads it; the figure to watch is precision over judged findings, with the
unjudged count beside it.

Sources: fetch each repository and extract the labelled commit (`commit` field) into
SRC_ROOT/<owner>-<name> (never into this repo), e.g. with
`git --git-dir=<mirror> archive <commit> | tar -x -C SRC_ROOT/<owner>-<name>`.

A third round (labels-round2.json, `--labels labels-round2.json`): eleven more repositories,
reviewed blind by three reviewers from the findings of 48a5b2f; five more that were asked for
could not be fetched (over the 500 MB snapshot limit).

A fourth round (labels-round3.json, `--labels labels-round3.json`): eleven more repositories
with findings or labelled misses (unsend, nextjs-subscription-payments, lmsqueezy nextjs-billing,
laudspeaker, plunk, growthbook, trigger.dev, bigcapital, stack-auth, Flowise, uploadthing),
reviewed blind by two reviewers from the findings of 8a51cd7; six more they read had handlers
and no findings (the Shopify Remix app template, next-saas-stripe-starter, taxonomy, jackson,
SaaS-Boilerplate, AgentGPT) and are not scored.

A fifth round (labels-round4.json, `--labels labels-round4.json`): ten more repositories
(autumn, better-auth, the Paddle Next.js starter, docmost, stripe-firebase-extensions,
tiledesk-server, appwrite templates, amplication, kan, papra), reviewed blind by three
reviewers from the findings of a173ebb (2026-12-07); saasfly had handlers and no findings.
autumn's 48 findings were sampled (25 judged).

A sixth round (labels-round6.json, `--labels labels-round6.json`): repositories not used before
(heyform, automatisch, hyperdx, peppermint, nango, stripe-samples subscription-use-cases,
reaction commerce, remix-saas, erxes, ever-gauzy), reviewed blind by three reviewers from the
findings of 304dc21 (2026-12-07; erxes' 44 findings sampled), then a fourth reviewer judged the
findings unjudged at 0ebc89c. In session 22 a reviewer also judged the findings of rounds four
and five unjudged at 84f76d8 (reasons marked "judged at a9").

Rounds seven, eight and nine (labels-round7.json, labels-round8.json, labels-round9.json), made
in session 23 (2026-12-07) from the frozen builds c68c440, 806dc9f and 396bcb3: repositories not
used before (Parabol, lunary, Giveth, logto, matrix-hookshot, ...; crowd.dev, kubero, webiny, ...;
and for round nine repositories the reviewers chose themselves: llmgateway, HypeChart,
takeover-done, spaceguide-ai-backend, bettersg checkMate, openship, github-for-jira, ...).
Reviewer T judged the round-seven findings new at 806dc9f. Source folders are named
owner-name under SRC_ROOT (round eight's were extracted with a reviewer prefix and are linked).

Round ten (labels-round10.json), made in session 24 (2026-12-07) from the frozen build f8f1d67:
three reviewers chose repositories by area (payment webhooks: onlook, sim, TaxHacker, scira,
giselle; queue consumers: mirlo, omnivore, NotifyBC, trench, tambo; other webhooks: synclinear,
cla-assistant, scrappy, Spoke, profit-pulse). sim's 128, mirlo's 27 and omnivore's 30 findings
were sampled (25 judged each).

Round eleven (labels-round11.json), session 24, from the frozen build e801971 (repositories:
errorwise-backend, ContextGPT-backend, infographic.io, collective-strategist, expense-backend,
vtchat; ActivityPub, maxun, support-service-lambdas; all-contributors app, changesets bot,
trop, safe-settings, langwatch, github-bot, next14-twitch-clone). Round twelve
(labels-round12.json), session 25 (2026-12-07), from the frozen build d441c5c, every finding
judged: headshots-starter, hypertrophy-ai, infraweigh, third-party-integrations, visionboard;
safe-events-service, forms-terraform, transcription-service, safe-client-gateway; stream.new,
linen.dev, slash-z, heysheet. Round thirteen (labels-round13.json), session 26 (2026-12-07), from
the frozen build 2c804d0: flowglad (25 of 52 findings judged), ShipFree, budget-tracking, ruzma;
daily-api, graphile starter, kutt, PostHog plugin-server; helper, inbound (25 of 29 judged),
threads, atomic-crm. Round fourteen (labels-round14.json), session 26, from the frozen build
2c804d0 (the session's start, so it is held out from the session's fixes): swetrix, cusdis,
casecobra, Datasell; di-account-management-backend, Panora, ctrlplane; eslint-github-bot,
ChatGPT-CodeReview, iffy, cyrus (yournextstore, video-course-starter-kit and hack-hour were read
and have no findings and no missed defect). Round fifteen (labels-round15.json), session 27
(2026-12-07), from the frozen build d6fff6d (the session's start, held out): courselit,
classroomio, manifold, joplin; mobile-purchases, notifications-workers, w3infra, badges;
kodus-ai, capgo, repo-automation-bots (wei/pull and spectrum were read and have no findings and
no missed defect). Round sixteen (labels-round16.json), session 28 (2026-12-07), from the frozen
build b8ac108 (the session's start, held out): next-forge, OpenPipe, lmnr, digitalhippo;
nhs-notify-supplier-api, txma-ticf-integration, asset-bundle-registry, club-social; eng-pipes,
dt-mergebot, pkg.pr.new, event_platform (padloc, cation and toriel were read and have no findings
and no missed defect). Round seventeen (labels-round17.json), session 29 (2026-12-07), from the
frozen build ee29c31 (the session's start, held out): rallly, UNLIMAGENT-, bakenshake, Slaid,
prestige-designs, kaamsync (payments); emailengine, wildduck, pager, dbSurface (queues); tegon,
argos, pages-cms, krisenberatung-portal, adviceApp (other webhooks; adviceApp's 30 findings
sampled, 25 judged). teable, Zero, Checkmate, openalternative, high-seas and gitpoap-backend were
read and have no findings and no missed defect.

Usage: eval/newset/score.py BINARY SRC_ROOT [--labels FILE] [--items FILE]
"""
import argparse, collections, concurrent.futures, json, os, subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("src_root")
    ap.add_argument("--labels", default="labels.json", help="the label file, beside this script or a path")
    ap.add_argument("--items", help="write every finding with its verdict here (JSON)")
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)
    labels = json.load(open(os.path.join(HERE, args.labels)))
    folders = sorted({l["repo"].replace("/", "-") for l in labels})

    def run(folder):
        path = os.path.join(args.src_root, folder)
        if not os.path.isdir(path):
            return folder, None
        p = subprocess.run([binary, "check", ".", "--format", "json", "--no-cache"], cwd=path,
                           capture_output=True, text=True)
        try:
            return folder, json.loads(p.stdout)
        except ValueError:
            return folder, None

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = dict(pool.map(run, folders))
    by_site = collections.defaultdict(list)
    for l in labels:
        by_site[(l["repo"].replace("/", "-"), l["path"], l["rule"])].append(l)
    totals, per_rule, items = collections.Counter(), collections.defaultdict(collections.Counter), []
    for folder, findings in sorted(results.items()):
        if findings is None:
            print(f"{folder}: sources missing or the run failed")
            continue
        for f in findings:
            near = [l for l in by_site.get((folder, f["file"], f["rule"]), [])
                    if abs(l["line"] - f["line"]) <= 3 and l["verdict"] != "missed"]
            verdicts = {l["verdict"] for l in near}
            # Two reviewers may disagree: a finding either calls false counts as false.
            verdict = ("false" if "false" in verdicts else "real" if "real" in verdicts
                       else "debatable" if verdicts else "unjudged")
            totals[verdict] += 1
            per_rule[f["rule"]][verdict] += 1
            items.append({"repo": folder, "rule": f["rule"], "file": f["file"], "line": f["line"], "verdict": verdict})
    missed = [l for l in labels if l["verdict"] == "missed"]
    found = sum(1 for l in missed if any(i["repo"] == l["repo"].replace("/", "-") and i["file"] == l["path"]
                                         and i["rule"] == l["rule"] and abs(i["line"] - l["line"]) <= 3 for i in items))
    for rule, c in sorted(per_rule.items()):
        print(f"{rule:34s} real={c['real']:3d} false={c['false']:3d} debatable={c['debatable']:3d} unjudged={c['unjudged']:3d}")
    judged = totals["real"] + totals["false"]
    print(f"precision(judged)={totals['real'] / max(1, judged):.3f} real={totals['real']} false={totals['false']} "
          f"debatable={totals['debatable']} unjudged={totals['unjudged']} missed-found={found}/{len(missed)}")
    if args.items:
        json.dump(items, open(args.items, "w"), indent=1)


if __name__ == "__main__":
    main()
