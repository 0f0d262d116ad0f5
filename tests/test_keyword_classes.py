"""The keyword arm on what agents store (issue 8): identifiers, dates, versions, addresses, code names,
any Unicode form, small workspaces and hostile text, end to end through the gateway against real
PostgreSQL and MiniLM.

One workspace holds every case's memories (target and near misses) plus filler from the repository's
demo conversation (``demo/memories.jsonl``: its turns with their session titles, dated in 2023 like
the cases and told again in seven rounds, and runs of twenty turns as long memories), so document
frequencies are those of a real conversation and the 15% rule is active (every filler title carries
"session" and a small number). Each case's question is typed as a person would; its target must be
rank 1 in lexical mode, in hybrid mode (embeddings drained, re-rank off) and in hybrid mode with the
embedder down (keyword arm only, ``dense_available=false``). Each case's near misses share parts of
the target's string (another ticket number, the month and day swapped, the next patch version,
another host with the same path, the same local part at another domain, the same parts without the
whole) and must rank lower; at least one of them must be returned by the keyword arm, so it really
competes. In hybrid mode with both arms up the target is first too: identifier precedence in fusion
(see rank_service/fusion.py). Without it, 27 to 30 of the 106 cases were not first (MiniLM cannot
tell ABC-1234 from ABC-1235, and equal-weight RRF let its choice tie or beat the exact match).
"""

from __future__ import annotations

import json
import time
from datetime import date, timedelta
from pathlib import Path
from typing import NamedTuple

import grpc
import pytest
from conftest import code_of
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from embed_service.server import EmbedService

DEMO = Path(__file__).resolve().parent.parent / "demo" / "memories.jsonl"
LEXICAL, HYBRID = m.RECALL_MODE_LEXICAL, m.RECALL_MODE_HYBRID
OK, INVALID = grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT


class Case(NamedTuple):
    id: str  # "<class>-<what>": the class is the part before the first "-"
    question: str
    target: str
    near: tuple[str, ...]


def case(id_: str, question: str, target: str, *near: str) -> Case:
    return Case(id_, question, target, near)


SHY, ZWSP, ZWJ, WJ, BOM = "\u00ad", "\u200b", "\u200d", "\u2060", "\ufeff"

CASES = [
    # hyphenated keys with letters and digits
    case(
        "key-whole",
        "what's the status of ABC-1234?",
        "ABC-1234: the login page crashes on Safari when cookies are blocked.",
        "ABC-1235: the login page flickers on Firefox after the update.",
        "ABC-123: the login page copy needs a review by marketing.",
        "Order ABC 1234 left the warehouse on Tuesday.",
    ),  # the parts without the whole (issue item 2)
    case(
        "key-transposed-digits",
        "INC-20931 postmortem",
        "Postmortem for INC-20931: the primary database ran out of disk during the nightly vacuum.",
        "Postmortem for INC-20913: a bad deploy disabled the payment webhook for an hour.",
    ),
    case(
        "key-typed-with-space",
        "OPS 4471",
        "Ticket OPS-4471 tracks the flaky nightly backup job.",
        "Ticket OPS-4417 tracks the disk alerts on the build agents.",
        "Ticket DEV-4471 tracks the broken dark mode toggle.",
    ),
    case(
        "key-lower-case-typed",
        "proj-88 deadline",
        "PROJ-88 has a hard deadline at the end of the quarter because of the audit.",
        "PROJ-89 has a soft deadline, nobody is waiting on it.",
        "PROJ-8 was the first epic of the migration.",
    ),
    case(
        "key-three-parts",
        "SEC-2024-0042",
        "Security advisory SEC-2024-0042 covers the token leak in the mobile client logs.",
        "Security advisory SEC-2024-0024 covers the outdated TLS ciphers on the edge proxy.",
    ),
    case(
        "key-cve",
        "are we patched for CVE-2021-44228?",
        "We patched CVE-2021-44228 (Log4Shell) on every Java service last December.",
        "CVE-2021-45046 is still open on the legacy reporting server.",
    ),
    case(
        "key-unicode-hyphen",
        "QA-3141",  # U+2010 HYPHEN, as typeset text has it
        "The upload test flakes again, see QA\u20103141.",
        "QA 3141 was the room number of the old test lab.",
        "QA-3114 tracks the slow download test.",
    ),
    case(
        "key-letters-after-digits",
        "which tasks use gpt-4o",
        "The summarisation tasks run on gpt-4o since the price cut.",
        "The classification tasks still run on gpt-4 because of the evaluation freeze.",
        "We tried gpt-4o-mini for autocomplete but latency was worse.",
    ),
    # numbers with signs or separators
    case(
        "number-negative-decimal",
        "freezer at -12.5",
        "The freezer in lab B read -12.5 degrees this morning, the alarm threshold is -10.",
        "The fridge in lab C read 12.5 degrees this morning, which is too warm.",
        "The freezer in lab D read -12.4 degrees yesterday.",
    ),
    case(
        "number-thousands",
        "when did we hit 1,000,000 users",
        "We reached 1,000,000 registered users in March, two months ahead of plan.",
        "We reached 100,000 registered users in the first summer.",
        "Marketing wants 10,000,000 registered users by the end of next year.",
    ),
    # Found in review: a long memory holding the exact string against a short one holding parts
    # (BM25's length normalisation alone ranked the short near miss first).
    case(
        "date-long-memory",
        "2023-11-07",
        "Quarterly planning notes: the team agreed to freeze the public API, to move the billing "
        "migration behind a feature flag, to hire two more support engineers before summer, to "
        "retire the old reporting cluster, and to hold the customer advisory board on 2023-11-07 "
        "in the Lisbon office with remote dial-in for everyone who cannot travel that week.",
        "Standup moved from 2023-11-06 to 2023-12-07.",
    ),
    case(
        "key-long-memory",
        "QA-4821",
        "Regression triage summary for the release train: the crash on resume is tracked as QA-4821, "
        "the flaky upload test was quarantined, the translation strings were handed to the vendor, "
        "the accessibility audit found three contrast issues, and the performance budget for the "
        "start screen was met on every supported device in the lab this sprint.",
        "QA-4820 duplicates QA-4822; 4821 users affected.",
    ),
    case(
        "number-typed-without-separators",
        "1000000 downloads milestone",
        "The 1,000,000 downloads milestone party is booked for Friday.",
        "The 100,000 downloads milestone came with a blog post.",
    ),
    case(
        "number-plus-sign",
        "+3 seconds drift",
        "Server clock drift measured +3 seconds on the primary; the NTP fix is pending.",
        "Server clock drift measured -3 seconds on the replica after the reboot.",
    ),
    case(
        "number-decimal-without-separator",
        "invoice 2500.75",
        "The Contoso invoice total was 2,500.75 after tax and shipping.",
        "The Fabrikam invoice total was 2,500.57 including the late fee.",
        "The Tailspin invoice total was 25,000.75 for the annual licence.",
    ),
    case(
        "number-negative-thousands",
        "balance -1,250",
        "The escrow account balance is -1,250 after the refund was charged back.",
        "The savings account balance is 1,250 after the transfer.",
    ),
    case(
        "number-unicode-minus",
        "freezer -18.5",  # U+2212 MINUS SIGN, as papers and LLMs write it
        "The freezer in lab E read \u221218.5 degrees after the door was left open.",
        "The freezer in lab F holds samples at 18.5 percent humidity.",
    ),
    # ISO dates, date-times and year-month
    case(
        "date-whole",
        "what happened on 2024-03-15?",
        "The Northwind contract was renewed on 2024-03-15 for three more years.",
        "The Northwind contract draft was circulated on 2024-03-16.",
        "The Northwind invoice dated 2024-15-03 has the month and day swapped.",
        "The Northwind kickoff was on 03/15/2024 in the old office.",  # the parts without the whole
        "Northwind visited on 15 March 2024.",
    ),
    case(
        "date-swapped-month-day",
        "2024-05-03",
        "Server room inspection is due on 2024-05-03.",
        "Fire drill is scheduled on 2024-03-05.",
    ),
    case(
        "date-next-day",
        "expiry 2025-11-30",
        "Maria's work visa expires on 2025-11-30, renewal paperwork starts in the summer.",
        "Maria's passport expires on 2025-11-29, she renews it at the consulate.",
        "Maria's lease expires on 2025-12-30.",
    ),
    case(
        "date-time-utc",
        "2024-06-01T09:30:00Z",
        "The deploy window opens at 2024-06-01T09:30:00Z and lasts two hours.",
        "The rollback window opens at 2024-06-01T19:30:00Z if the metrics look bad.",
        "The freeze starts at 2024-06-02T09:30:00Z.",
    ),
    case(
        "date-time-typed-with-space",
        "2024-07-04 18:00",
        "Fireworks start 2024-07-04 18:00 at the harbour.",
        "Parade starts 2024-07-04 08:00 on the main street.",
    ),
    case(
        "date-year-month",
        "budget freeze 2024-09",
        "The hiring budget freeze starts 2024-09 and lasts the whole quarter.",
        "The travel budget freeze started 2024-08 and ended in the autumn.",
        "The marketing budget freeze is planned for 2025-09.",
    ),
    case(
        "date-time-offset",
        "2024-02-29T23:59:59+01:00 cutoff",
        "Submissions cutoff: 2024-02-29T23:59:59+01:00 (Lisbon time).",
        "Reviews cutoff: 2024-02-28T23:59:59+01:00.",
    ),
    case(
        "date-nonbreaking-hyphens",
        "audit 2024-11-05",  # U+2011, as LLM-written memories often have
        "The agent noted: audit report due 2024\u201111\u201105, owner Priya.",
        "The agent noted: audit report draft due 2024-05-11, owner Priya.",
    ),
    # version strings
    case(
        "version-patch",
        "what broke in v1.2.3?",
        "v1.2.3 broke the CSV export because the delimiter option was renamed.",
        "v1.2.4 fixed the CSV export delimiter option.",
        "v1.3.2 added a JSON export next to the CSV one.",
    ),
    case(
        "version-prerelease",
        "2.0.1-rc1",
        "Release candidate 2.0.1-rc1 fails the upgrade test on SQLite.",
        "Release candidate 2.0.1-rc2 passes every upgrade test.",
        "The final 2.0.1 is tagged and on the download page.",
    ),
    case(
        "version-bare-typed-with-v",
        "v4.7.0 changelog",
        "The 4.7.0 changelog lists the new plugin loader and two breaking changes.",
        "The 4.7.1 changelog is just a security fix.",
        "The 4.0.7 changelog was never published.",
    ),
    case(
        "version-runtime",
        "python 3.11.4",
        "The data pipeline image pins Python 3.11.4 because of a pandas wheel.",
        "The web image moved to Python 3.11.5 last sprint.",
        "The notebook image still ships Python 3.1.14, which nobody uses.",
    ),
    case(
        "version-two-components",
        "v2.10",
        "Helm chart v2.10 switched the default storage class.",
        "Helm chart v2.1 was the first one with autoscaling.",
    ),
    # IPv4 addresses
    case(
        "ipv4-whole",
        "192.168.1.20",
        "The office printer has the static address 192.168.1.20.",
        "The office NAS has the static address 192.168.1.21.",
        "The guest router is at 192.168.10.2.",
    ),
    case(
        "ipv4-port",
        "10.0.0.12:8080",
        "The staging API listens on 10.0.0.12:8080 behind the VPN.",
        "The staging admin panel listens on 10.0.0.12:8443.",
        "The staging metrics exporter listens on 10.0.0.13:8080.",
    ),
    case(
        "ipv4-last-octet",
        "gateway 172.16.254.1",
        "The site gateway is 172.16.254.1, do not change its lease.",
        "The backup gateway is 172.16.254.10 on the second uplink.",
    ),
    case(
        "ipv4-address-of-address-and-port",
        "10.20.30.40",
        "The Redis cache runs on 10.20.30.40:6379 in the private subnet.",
        "The Redis replica runs on 10.20.30.41:6379.",
    ),
    # URLs
    case(
        "url-with-scheme",
        "https://github.com/acme/rocket/issues/42",
        "The crash report is https://github.com/acme/rocket/issues/42 with a full stack trace.",
        "The mirrored report is https://gitlab.com/acme/rocket/issues/42 (other host, same path).",
        "The feature request is https://github.com/acme/rocket/issues/24.",
    ),
    case(
        "url-typed-without-scheme",
        "github.com/acme/rocket/pull/7",
        "Review https://github.com/acme/rocket/pull/7 before the release branch is cut.",
        "Review https://github.com/acme/rocket/pull/70 after the release.",
    ),
    case(
        "url-host",
        "docs.acme.dev",
        "The install guide lives at https://docs.acme.dev/setup/install for new hires.",
        "The old install guide lives at https://docs.acme.io/setup/install and is outdated.",
    ),
    case(
        "url-path-word",
        "latency-overview dashboard",
        "The Grafana board https://grafana.acme.net/d/latency-overview/api shows p99 per endpoint.",
        "The Grafana board https://grafana.acme.net/d/error-overview/api shows 5xx per endpoint.",
    ),
    case(
        "url-other-host-same-path",
        "staging.acme.com/api/v2/orders",
        "Load tests hit https://staging.acme.com/api/v2/orders with 200 requests per second.",
        "Customers hit https://prod.acme.com/api/v2/orders all day.",
        "Partners hit https://staging.acme.com/api/v1/orders until they migrate.",
    ),
    case(
        "url-without-scheme-stored",
        "example.org pricing",
        "Competitor pricing page: example.org/pricing, checked monthly.",
        "Our own pricing page: example.com/pricing.",
    ),
    case(
        "url-query-word",
        "report quarter=q3",
        "Finance report link: https://reports.acme.net/view?quarter=q3&year=2024 for the board.",
        "Finance report link: https://reports.acme.net/view?quarter=q4&year=2024 for the auditors.",
    ),
    # email addresses
    case(
        "email-whole",
        "jane.doe@example.co.uk",
        "Invoices go to jane.doe@example.co.uk since the reorganisation.",
        "Newsletters go to jane.doe@example.com (same local part, other domain).",
        "Contracts go to john.doe@example.co.uk.",
    ),
    case(
        "email-local-part",
        "jsmith at northwind",
        "The on-call contact this week is jsmith@northwind.io.",
        "The on-call contact last week was jsmyth@northwind.io.",
        "The old contact address jsmith@oldcorp.net bounces.",
    ),
    case(
        "email-domain",
        "anyone at fabrikam.com?",
        "Our contact at the supplier is sales@fabrikam.com.",
        "Our contact at the reseller is sales@fabrikam.co.",
    ),
    case(
        "email-same-local-other-domain",
        "ops@acme.io",
        "Pager alerts are mailed to ops@acme.io and forwarded to the phone.",
        "Billing alerts are mailed to ops@acme.com by mistake.",
        "Build alerts are mailed to dev@acme.io.",
    ),
    case(
        "email-plus-addressing",
        "alerts+db@acme.io",
        "Database alerts use the alias alerts+db@acme.io.",
        "Web alerts use the alias alerts+web@acme.io.",
    ),
    # file paths, POSIX and Windows
    case(
        "path-posix-whole",
        "/etc/nginx/nginx.conf",
        "The rate limit lives in /etc/nginx/nginx.conf on the edge boxes.",
        "The virtual hosts live in /etc/nginx/sites-enabled/default.",
        "The dev laptop config is /usr/local/etc/nginx/nginx.conf.",
    ),
    case(
        "path-posix-file-name",
        "where is settings.py",
        "The Django config is /srv/app/settings.py on the web server.",
        "The feature flags are /srv/app/settings.json on the web server.",
    ),
    case(
        "path-posix-home",
        "~/.ssh/config",
        "The jump host alias is defined in ~/.ssh/config on my laptop.",
        "The jump host key is pinned in ~/.ssh/known_hosts.",
    ),
    case(
        "path-posix-relative",
        "store_service/search/analysis.py",
        "The tokenizer rules are in src/store_service/search/analysis.py.",
        "The BM25 scoring is in src/store_service/search/candidates.py.",
    ),
    case(
        "path-posix-segment",
        "python3.12 interpreter",
        "The build agents use /opt/tools/bin/python3.12 as the interpreter.",
        "The old agents used /opt/tools/bin/python3.11 as the interpreter.",
    ),
    case(
        "path-windows-whole",
        r"C:\Users\maria\report.docx",
        r"Maria's draft is saved as C:\Users\maria\report.docx on the shared PC.",
        r"Mario's draft is saved as C:\Users\mario\report.docx on the shared PC.",
        r"The backup copy is D:\Users\maria\report.docx.",
    ),
    case(
        "path-windows-unc-file",
        "q3.xlsx",
        r"The forecast is \\fileserver\share\finance\q3.xlsx, updated every Monday.",
        r"The old forecast is \\fileserver\share\finance\q4.xlsx.",
    ),
    case(
        "path-windows-with-space",
        r"C:\Program Files\Acme\acme.exe",
        r"The agent binary is C:\Program Files\Acme\acme.exe on every desktop.",
        r"The updater binary is C:\Program Files\Acme\acme-updater.exe.",
    ),
    # words joined by a slash
    case(
        "slash-pair",
        "input/output errors",
        "The kernel log shows input/output errors on disk sdb since Monday.",
        "The kernel log shows input errors on the keyboard driver.",
    ),
    case(
        "slash-order",
        "client/server split",
        "We agreed on a client/server split for the sync engine.",
        "The server/client naming in the old code is reversed.",
    ),
    case(
        "slash-and-or",
        "and/or billing",
        "The contract allows monthly and/or quarterly billing.",
        "The contract allows monthly or quarterly billing, never both.",
    ),
    case(
        "slash-read-write",
        "read/write access",
        "Contractors get read/write access to the design folder.",
        "Contractors get read access to the finance folder.",
    ),
    case(
        "slash-quarters",
        "Q1/Q2 targets",
        "The Q1/Q2 targets were cut by ten percent.",
        "The Q2 targets were raised after the funding round.",
    ),
    # snake_case
    case(
        "snake-whole",
        "max_retry_count",
        "Set max_retry_count to 5 for the payment worker.",
        "Set max_retry_delay to 30 seconds for the payment worker.",
    ),
    case(
        "snake-screaming",
        "DATABASE_URL",
        "DATABASE_URL must point at the pooler, not at the primary.",
        "DATABASE_NAME is read only by the migration script.",
    ),
    case(
        "snake-dunder",
        "__init__.py",
        "The package is missing an __init__.py, so the import fails.",
        "The package has a __main__.py, so it runs with python -m.",
    ),
    case(
        "snake-parts-typed",
        "backoff limit",
        "The job config sets queue_backoff_limit to 3.",
        "The job config sets queue_backoff_delay to 10.",
    ),
    case(
        "snake-two-parts",
        "user_id",
        "The events table is partitioned by user_id.",
        "The events table stores the user agent and the session id.",
    ),
    # camelCase
    case(
        "camel-whole",
        "getUserName",
        "getUserName returns null for deleted accounts.",
        "getUserId returns zero for deleted accounts.",
        "setUserName rejects empty strings.",
    ),
    case(
        "camel-typed-lower",
        "fetchusername bug",
        "The bug is in fetchUserName: it ignores the locale.",
        "The bug in fetchUserId was fixed last week.",
    ),
    case(
        "camel-acronym",
        "XMLHttpRequest",
        "The legacy widget still uses XMLHttpRequest instead of fetch.",
        "The new widget wraps HttpRequest in a retry helper.",
    ),
    case(
        "camel-pascal",
        "OrderService",
        "OrderService owns the checkout transaction.",
        "OrderServiceTest mocks the payment gateway.",
    ),
    case(
        "camel-parts-typed",
        "payment retry policy",
        "paymentRetryPolicy doubles the delay after every failure.",
        "The shipment retry policy is fixed at five minutes.",
    ),
    # kebab-case
    case(
        "kebab-whole",
        "feature-flag-service",
        "The feature-flag-service caches flags for sixty seconds.",
        "The feature-flag-ui shows the flags to product managers.",
    ),
    case(
        "kebab-package",
        "left-pad",
        "We vendored left-pad after the registry incident.",
        "We replaced left-align helpers with CSS.",
    ),
    case(
        "kebab-cli-flag",
        "--dry-run",
        "Always run the migration with --dry-run first.",
        "Always run the cleanup with --force only after a backup, then run it again.",
    ),
    case(
        "kebab-three-parts",
        "kube-state-metrics",
        "kube-state-metrics was OOM killed twice on the busy cluster.",
        "kube-proxy metrics show the conntrack table filling up.",
    ),
    # dotted code identifiers
    case(
        "dotted-python",
        "os.path.join",
        "Use os.path.join instead of string concatenation for paths.",
        "Use os.path.split to get the folder and the file name.",
    ),
    case(
        "dotted-java",
        "com.acme.billing.InvoiceService",
        "com.acme.billing.InvoiceService throws on negative totals.",
        "com.acme.billing.PaymentService retries on timeouts.",
    ),
    case(
        "dotted-config-key",
        "spring.datasource.url",
        "spring.datasource.url points at the read replica in the reporting profile.",
        "spring.datasource.username is injected from the vault.",
    ),
    case(
        "dotted-numpy",
        "np.linalg.norm",
        "The similarity code normalises with np.linalg.norm along axis 1.",
        "The solver code calls np.linalg.inv, which is slow.",
    ),
    # hashtags
    case(
        "hashtag-with-digits",
        "#incident-42",
        "Updates for the outage are in #incident-42 on chat.",
        "Updates for the older outage are in #incident-24.",
    ),
    case(
        "hashtag-whole",
        "#q3planning",
        "Post your estimates in #q3planning before Thursday.",
        "Post your estimates in #q4planning in October.",
        "The q3planning spreadsheet is read-only.",
    ),
    case(
        "hashtag-vs-word",
        "#rustlang",
        "Maria shares her notes under #rustlang every Friday.",
        "Maria thinks rustlang meetups are too crowded.",
    ),
    case(
        "hashtag-camel-typed-lower",
        "#throwbackthursday",
        "Tom posted the old team photo with #ThrowbackThursday.",
        "Tom posted the old office photo with #ThrowbackFriday.",
        "@ThrowbackThursday reshared the photo.",
    ),
    # @-mentions
    case(
        "mention-whole",
        "@alice",
        "Ask @alice about the roadmap slides.",
        "Ask @alicia about the budget slides.",
        "Alice from sales sent the roadmap draft.",
    ),
    case(
        "mention-kebab",
        "@devops-team",
        "Page @devops-team when the queue depth passes a thousand.",
        "Page @devops only for production outages.",
    ),
    case(
        "mention-snake",
        "@bob_smith",
        "@bob_smith owns the quarterly access review.",
        "@bob_smyth owns the laptop inventory.",
    ),
    case(
        "mention-dotted",
        "@jane.roe",
        "Send the signed NDA to @jane.roe in the legal channel.",
        "Send the draft NDA to @jane.rowe for comments.",
    ),
    # amounts with currency symbols and percentages
    case(
        "currency-dollar",
        "$1,200.50",
        "The conference hotel cost $1,200.50 for three nights.",
        "The conference flights cost $1,200.05 in total.",
        "The conference booth cost $12,000.50.",
        "The conference budget line says 1,200.50 without a currency.",
    ),
    case(
        "currency-euro-prefix",
        "€30",
        "Lunch for the offsite was €30 a head.",
        "Dinner for the offsite was €300 for the table.",
        "Breakfast was 30€ per person in the other hotel.",
    ),
    case(
        "currency-pound",
        "£5.99",
        "The coffee subscription costs £5.99 a month.",
        "The music subscription costs £5.49 a month.",
        "The free plan has 5.99 GB of storage.",
    ),
    case(
        "currency-typed-without-symbol",
        "2340.10 refund",
        "The refund of $2,340.10 arrived on the company card.",
        "The refund of $2,340.01 is still pending.",
    ),
    case(
        "currency-yen",
        "¥15,000",
        "The Tokyo hotel charged ¥15,000 per night.",
        "The Osaka hotel charged ¥1,500 for breakfast.",
        "The step challenge goal is 15,000 steps a day.",
    ),
    case(
        "currency-percent",
        "99.95% uptime",
        "The SLA promises 99.95% uptime per calendar month.",
        "The old SLA promised 99.9% uptime and 95% of tickets answered in a day.",
    ),
    # NFKC forms: full-width characters, ligatures, sub/superscripts
    case(
        "nfkc-fullwidth-digits",
        "room 204",
        "The retro is in room \uff12\uff10\uff14 on the second floor.",
        "The standup is in room 240 on the second floor.",
    ),
    case(
        "nfkc-fullwidth-key",
        "XYZ-77",
        "\uff38\uff39\uff3a\uff0d\uff17\uff17 is the ticket for the broken badge reader.",
        "XYZ-78 is the ticket for the broken coffee machine.",
    ),
    case(
        "nfkc-ligature-in-memory",
        "final figures fleet report",
        "The \ufb01nal \ufb01gures are in the \ufb02eet report.",
        "The final draft is in the fleet folder.",
    ),
    case(
        "nfkc-ligature-in-question",
        "o\ufb03ce supplies order",
        "The office supplies order goes out on Wednesdays.",
        "The kitchen supplies order goes out on Fridays.",
    ),
    case(
        "nfkc-subscript",
        "CO2 sensor",
        "The CO\u2082 sensor in the meeting room reads too high after lunch.",
        "The CO sensor in the boiler room is due for calibration.",
    ),
    case(
        "nfkc-fullwidth-email",
        "joe@example.net",
        "Joe's address is \uff4a\uff4f\uff45\uff20\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45\uff0e\uff4e\uff45\uff54.",
        "Joe's old address is joe@example.org.",
    ),
    # invisible characters inside words
    case(
        "invisible-soft-hyphen",
        "infrastructure budget",
        f"The infra{SHY}structure budget doubles next year.",
        "The infra team will review the structure of the budget next year.",
    ),
    case(
        "invisible-zero-width-space",
        "password rotation",
        f"The pass{ZWSP}word rotation runs every ninety days.",
        "The pass rotation of the word list runs every year.",
    ),
    case(
        "invisible-joiner",
        "database failover",
        f"The data{ZWJ}base failover took forty seconds.",
        "The data and the base image failover was manual.",
    ),
    case(
        "invisible-word-joiner-in-key",
        "DOC-777",
        f"DOC{WJ}-{WJ}777 is the design doc for offline mode.",
        "DOC-778 is the design doc for sync.",
    ),
    case(
        "invisible-bom",
        "quarterly OKRs",
        f"{BOM}Quarterly OKRs are due on the first Monday.",
        "Yearly OKRs are due in January.",
    ),
    case(
        "invisible-in-question",
        f"micro{ZWSP}services split",  # typed with a zero-width space
        "The microservices split is on hold until the hiring freeze ends.",
        "The micro services of the old platform were split by team.",
    ),
    # case differences
    case(
        "case-upper-question",
        "KUBERNETES UPGRADE",
        "The kubernetes upgrade is scheduled after the holidays.",
        "The kubectl upgrade needs admin rights.",
    ),
    case(
        "case-mixed-email",
        "Max.Mustermann@Example.COM",
        "Escalations go to max.mustermann@example.com.",
        "Escalations used to go to max.mustermann@example.org.",
    ),
    case(
        "case-url-host",
        "HTTPS://Status.Acme.Cloud/Incidents",
        "Public incidents are posted on https://status.acme.cloud/incidents.",
        "Internal incidents are posted on https://status.acme.internal/incidents.",
    ),
    case(
        "case-german-sharp-s",
        "HAUPTSTRASSE 5",
        "The new office is at Hauptstraße 5, third floor.",
        "The old office was at Hauptplatz 5.",
    ),
    case(
        "case-acronym-lower", "nasa grant", "The NASA grant covers two postdocs.", "The ESA grant covers one postdoc."
    ),
]
CLASSES = [
    "key",
    "number",
    "date",
    "version",
    "ipv4",
    "url",
    "email",
    "path",
    "slash",
    "snake",
    "camel",
    "kebab",
    "dotted",
    "hashtag",
    "mention",
    "currency",
    "nfkc",
    "invisible",
    "case",
]


def class_of(c: Case) -> str:
    return c.id.split("-", 1)[0]


def test_table_covers_every_class():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert len(CASES) >= 80
    counts = {k: sum(1 for c in CASES if class_of(c) == k) for k in CLASSES}
    assert {class_of(c) for c in CASES} == set(CLASSES)
    assert all(n >= 4 for n in counts.values()), counts
    texts = [t for c in CASES for t in (c.target, *c.near)]
    assert len(texts) == len(set(texts))  # one memory per text, so a target is unambiguous
    assert all(c.near for c in CASES)


def filler() -> list[tuple[str, str]]:
    """Seven rounds of the demo conversation's 60 turns (420 short memories), moved to May to
    October 2023 (the year of the cases' dates; a summer of talk, as a workspace of that year holds)
    and round ``k`` ``k`` days on, its sessions numbered on (``4k + 1`` to ``4k + 4``); and 60 long
    memories, each twenty consecutive turns of those rounds as one text (starting every seventh).
    Dates as in a real workspace make the year and the busiest month common terms: "07" (July) is in
    more than 15% of the rows, so the 15% rule drops it from "2023-11-07" as it would there. The
    long memories keep the mean length of a workspace that holds notes and documents beside chat
    turns: with chat turns alone the length normalisation of BM25 favours any short row."""
    with open(DEMO, encoding="utf-8") as f:
        turns = [json.loads(line) for line in f if line.strip()]
    told = []
    for k in range(7):
        for r in turns:
            demo_day = date.fromisoformat(r["occurred_at"][:10])
            day = demo_day.replace(year=2023, month=demo_day.month + 3) + timedelta(days=k)
            session = 4 * k + int(r["id"][1:].split(":")[0])
            told.append((f"{r['title'].split(', ')[0]}, {day} (session {session})", r["body"]))
    runs = [
        (f"Sessions {told[i][0].split('(session ')[1][:-1]} on, notes", "\n".join(b for _, b in told[i : i + 20]))
        for i in range(0, 7 * 60, 7)
    ]
    rows = told + runs
    assert (len(told), len(runs)) == (420, 60)
    assert all("session" in t.lower() for t, _ in rows)
    assert sum("-07-" in t for t, _ in rows) > 0.15 * len(rows)
    return rows


def remember_all(member, entries: list[tuple[str, str]]) -> list[str]:
    """Stores (title, body) pairs through RememberBatch, 500 a call; their ids in order."""
    ids = []
    for i in range(0, len(entries), 500):
        reqs = [
            g.RememberRequest(
                purpose=m.PURPOSE_CONVERSATION, kind=m.KIND_NOTE, title=t, body=b, audience=m.AUDIENCE_WORKSPACE
            )
            for t, b in entries[i : i + 500]
        ]
        results = member.stack.memory.RememberBatch(g.RememberBatchRequest(requests=reqs), metadata=member.md()).results
        assert all(r.HasField("memory") for r in results), [r.error for r in results if not r.HasField("memory")]
        ids += [r.memory.id for r in results]
    return ids


@pytest.fixture(scope="module")
def corpus(stack):
    """One workspace: every case's memories and the filler, embeddings drained."""
    ws = stack.workspace("keyword classes")
    member = stack.member(ws)
    texts = [t for c in CASES for t in (c.target, *c.near)]
    rows = filler()
    ids = remember_all(member, [("", t) for t in texts] + rows)
    stack.wait_backlog_empty(timeout=600)
    # ids holds the filler rows after the cases' texts: only the first len(texts) ids are the cases'.
    return {"member": member, "id": dict(zip(texts, ids, strict=False))}


def top(resp: g.RecallResponse, n: int = 3) -> list[str]:
    """The first ``n`` hits, readable in a failure message."""
    return [f"{it.rank}. lex={it.lexical_rank} dense={it.dense_rank} {it.memory.body[:70]!r}" for it in resp.items[:n]]


def check_case(c: Case, corpus, resp: g.RecallResponse) -> None:
    ids = [it.memory.id for it in resp.items]
    target = corpus["id"][c.target]
    where = [
        f"target at {it.rank}: lex={it.lexical_rank} dense={it.dense_rank}"
        for it in resp.items
        if it.memory.id == target
    ]
    assert ids and ids[0] == target, (c.question, where, top(resp))
    assert resp.items[0].lexical_rank == 1, top(resp)


IDS = [c.id for c in CASES]


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_lexical_target_first_near_misses_lower(corpus, c):
    resp = corpus["member"].recall(c.question, mode=LEXICAL, top_k=50, skip_rerank=True)
    check_case(c, corpus, resp)
    ids = [it.memory.id for it in resp.items]
    near = {corpus["id"][t] for t in c.near}
    # At least one near miss shares a lexeme with the question: it competes, and loses.
    assert near & set(ids[1:]), (c.question, top(resp, 5))
    assert all(it.dense_rank == 0 for it in resp.items) and resp.counts.dense == 0


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_hybrid_keyword_arm_ranks_target_first(corpus, c):
    """Hybrid with both arms: the keyword arm's ranks (recomputed after the walk) put the target first."""
    resp = corpus["member"].recall(c.question, mode=HYBRID, top_k=200, skip_rerank=True)
    assert resp.dense_available and not resp.reranked and resp.mode == HYBRID
    target = corpus["id"][c.target]
    assert [it.lexical_rank for it in resp.items if it.memory.id == target] == [1], top(resp)


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_hybrid_target_first(corpus, c):
    resp = corpus["member"].recall(c.question, mode=HYBRID, top_k=10, skip_rerank=True)
    assert resp.dense_available and not resp.reranked
    check_case(c, corpus, resp)


def wait_dense_back(stack, member, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if member.recall("dense back?", mode=HYBRID, skip_rerank=True).dense_available:
            return
        time.sleep(0.25)
    raise AssertionError("the dense arm did not come back after the embed service restarted")


class TestEmbedderDown:
    """The embed service stopped: hybrid answers from the keyword arm alone, target first."""

    @pytest.fixture(scope="class")
    def embedder_down(self, stack, corpus):
        lexical = {
            c.id: [it.memory.id for it in corpus["member"].recall(c.question, mode=LEXICAL, top_k=10).items]
            for c in CASES
        }
        stack.embed.stop()
        try:
            yield lexical
        finally:
            stack.embed = EmbedService(stack.embed_bind, "", encoder=stack.encoder)
            wait_dense_back(stack, corpus["member"])

    @pytest.mark.parametrize("c", CASES, ids=IDS)
    def test_hybrid_answers_from_keyword_arm(self, corpus, embedder_down, c):
        resp = corpus["member"].recall(c.question, mode=HYBRID, top_k=10, skip_rerank=True)
        assert not resp.dense_available and resp.mode == HYBRID
        check_case(c, corpus, resp)
        assert all(it.dense_rank == 0 and it.cosine == 0.0 for it in resp.items) and resp.counts.dense == 0
        assert [it.memory.id for it in resp.items] == embedder_down[c.id]  # exactly the lexical answer


# The small workspace: with at most six rows every present term is in 15% or more of them, so
# before the rarest-term rule a three-term question lost every term and found nothing.
SMALL = [
    "Maria booked the team offsite in Porto for June.",  # the target: the only row with "Porto"
    "Maria booked the team dinner for Friday.",
    "The team offsite moved to the mountains.",
    "Maria asked about the offsite budget.",
    "The whole team liked the offsite last year.",
    "Maria leads the team retrospectives.",
]


@pytest.mark.parametrize("size", range(1, 7), ids=[f"small-{n}-memories" for n in range(1, 7)])
def test_small_workspace_three_term_question(stack, size):
    ws = stack.workspace(f"small {size}")
    member = stack.member(ws)
    ids = remember_all(member, [("", t) for t in SMALL[:size]])
    resp = member.recall("Maria offsite Porto", mode=LEXICAL, skip_rerank=True)
    # Every present term is in 15% or more of at most six rows: only the rarest is kept ("Porto",
    # or with one row "Maria", first asked among equals), and only the target holds it.
    assert [it.memory.id for it in resp.items] == [ids[0]]
    assert resp.items[0].lexical_rank == 1 and resp.counts.lexical == 1
    # two terms: no 15% rule; every row sharing a term is found, the target (both terms) first
    resp = member.recall("offsite Porto", mode=LEXICAL, skip_rerank=True)
    assert resp.items[0].memory.id == ids[0]
    assert {it.memory.id for it in resp.items} == {
        i for i, t in zip(ids, SMALL, strict=False) if "offsite" in t or "Porto" in t
    }


# Hostile text: every answer is OK or INVALID_ARGUMENT, never INTERNAL or UNKNOWN, and it comes
# back (pytest-timeout bounds the time; nothing is timed here). Lone surrogates cannot be sent:
# protobuf refuses to serialise them on the client.
JOINERS = "a-" * 10_000 + "a"
LONG_URL = ("https://example.com/" + "/".join(f"seg{i}" for i in range(4_000)))[:30_000]
HOSTILE = {
    "joiners-10000": JOINERS,
    "url-30000-chars": LONG_URL,
    "emoji-only": "\U0001f600\U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f1f5\U0001f1f9",
    "rtl-arabic": "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "rtl-hebrew-override": "\u202e\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd\u202c ABC-1234",
    "zero-width-only": "\u200b\u200c\u200d\u2060\ufeff\u00ad" * 100,
    "combining-marks": "e" + "\u0301" * 5_000,
    "slashes-and-dots": "/." * 10_000,
    "emails-chained": "a@" * 10_000 + "b.c",
    "dates-chained": "2024-03-15T" * 2_000,
}


@pytest.fixture(scope="module")
def hostile_ws(stack):
    ws = stack.workspace("hostile keyword text")
    member = stack.member(ws)
    assert len(LONG_URL) == 30_000 and len(JOINERS) == 20_001
    stored = {}
    for name, text in HOSTILE.items():
        assert len(text) <= 32_768 and len(text.encode()) <= 65_536, name
        got = code_of(member.remember, text)
        assert got in (OK, INVALID), (name, got)
        if got == OK:
            stored[name] = member.recall(text, mode=LEXICAL, top_k=1).items
    return member, stored


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(HOSTILE), ids=list(HOSTILE))
def test_hostile_memory_and_question_never_internal(hostile_ws, name):
    member, _ = hostile_ws
    text = HOSTILE[name]
    for mode in (LEXICAL, m.RECALL_MODE_DENSE, HYBRID):
        got = code_of(member.recall, text, mode=mode, skip_rerank=True)
        assert got in (OK, INVALID), (name, mode, got)
    assert code_of(member.remember, text, title=text[:1000]) in (OK, INVALID)


def test_hostile_text_is_stored_and_found_by_itself(hostile_ws):
    _, found = hostile_ws
    # Every one stored (all are within the limits) but the invisible-only text, which is blank
    # (analysis.is_blank) and refused as INVALID_ARGUMENT like a body of spaces.
    assert set(found) == set(HOSTILE) - {"zero-width-only"}
    for name in ("joiners-10000", "url-30000-chars", "rtl-arabic", "rtl-hebrew-override", "dates-chained"):
        assert found[name] and found[name][0].memory.body == HOSTILE[name], name


def test_nul_is_invalid_in_memories_and_harmless_in_questions(hostile_ws):
    member, _ = hostile_ws
    assert code_of(member.remember, "before \x00 after") == INVALID
    assert code_of(member.remember, "fine body", title="nul\x00title") == INVALID
    # A question accepts any text (RecallRequest.query); NUL counts as a space.
    stored = member.remember("The badge reader code is QX-5521.")
    for query in ("QX-5521\x00", "\x00QX-5521", "QX\x00-5521", "ABC-1234\x00" * 100, JOINERS[:10_000] + "\x00"):
        for mode in (LEXICAL, HYBRID):
            assert code_of(member.recall, query, mode=mode, skip_rerank=True) == OK, (query[:20], mode)
    assert member.recall("QX-5521\x00", mode=LEXICAL).items[0].memory.id == stored.id
    assert code_of(member.recall, "\x00", mode=LEXICAL) in (OK, INVALID)
