/**
 * The dashboard's budgets panel: each budget per key (spent, left, period end) from
 * `GET /api/usage`, and the turns a budget paused, answered with Approve once / Raise / Deny
 * (`POST /api/approvals/:id`, as the operator).
 */

/** An element with its text and class, either left out when not given. */
export function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

const num = (n) => (n === null || n === undefined ? "–" : Math.round(n).toLocaleString("en-US"));
const cost = (n) => (n === null || n === undefined ? "" : ` · cost ${n.toFixed(4)}`);

/** `api(path, init)` and `getJson(path)` are the dashboard's authenticated requests. */
export function createBudgetsPanel({ api, getJson, onError }) {
  const list = document.getElementById("budgets-list");
  const pauses = document.getElementById("budget-pauses");

  function standingRow(budget, s) {
    const tr = el("tr");
    tr.dataset.testid = "budget-row";
    const limit = [
      budget.tokens !== null ? `${num(s.limit_tokens)} tokens` : null,
      budget.cost !== null && s.limit_cost !== null ? `cost ${s.limit_cost.toFixed(4)}` : null,
    ]
      .filter(Boolean)
      .join(", ");
    const left = [
      s.left_tokens !== null ? `${num(s.left_tokens)} tokens` : null,
      s.left_cost !== null ? `cost ${s.left_cost.toFixed(4)}` : null,
    ]
      .filter(Boolean)
      .join(", ");
    tr.append(
      el("td", `${budget.scope} per ${budget.period}`),
      el("td", s.key ?? "all"),
      el("td", `${num(s.spent_tokens)} tokens${cost(s.spent_cost)}`),
      el("td", limit + (s.raises > 0 ? ` (raised ${s.raises}×)` : "")),
      el("td", s.used_up ? "used up" : left, s.used_up ? "badge bad" : ""),
      el("td", new Date(s.period_end).toLocaleString()),
    );
    return tr;
  }

  function pauseCard(p) {
    const card = el("div", undefined, "dash-approval");
    card.dataset.testid = "budget-pause";
    card.dataset.pauseId = p.id;
    card.append(
      el("div", `${p.id} · ${p.budget}${p.key ? ` (${p.key})` : ""} · ${p.chat ?? p.session_key}`),
    );
    card.append(el("pre", p.summary, "command"));
    const actions = el("div", undefined, "approval-actions");
    const result = el("span", "", "muted");
    const answers = [
      ["approve", "Approve once", "button primary"],
      ["raise", "Raise for the period", "button"],
      ["deny", "Deny", "button danger"],
    ].map(([decision, label, className]) => {
      const b = el("button", label, className);
      b.type = "button";
      b.dataset.testid = `budget-${decision}`;
      b.addEventListener("click", async () => {
        for (const other of actions.querySelectorAll("button")) other.disabled = true;
        result.textContent = `${label}…`;
        const response = await api(`/api/approvals/${encodeURIComponent(p.id)}`, {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ decision }),
        }).catch((err) => ({ ok: false, status: 0, json: async () => ({ error: err }) }));
        const body = await response.json().catch(() => ({}));
        result.textContent = response.ok ? `${label}: done.` : (body?.error?.message ?? "Failed.");
        setTimeout(load, 1_500);
      });
      return b;
    });
    actions.append(...answers, result);
    card.append(actions);
    return card;
  }

  async function load() {
    try {
      const report = await getJson("/api/usage");
      const rows = report.budgets.flatMap((b) =>
        b.standings.length > 0
          ? b.standings.map((s) => standingRow(b, s))
          : [
              standingRow(b, {
                key: null,
                spent_tokens: 0,
                spent_cost: null,
                limit_tokens: b.tokens,
                limit_cost: b.cost,
                left_tokens: b.tokens,
                left_cost: b.cost,
                raises: 0,
                used_up: false,
                period_end: Date.now(),
              }),
            ],
      );
      if (rows.length === 0) {
        const tr = el("tr");
        const td = el("td", "No budgets configured (budgets: in config.yaml).", "muted");
        td.colSpan = 6;
        tr.append(td);
        rows.push(tr);
      }
      list.replaceChildren(...rows);
      const cards = report.pauses.map(pauseCard);
      if (cards.length === 0) cards.push(el("p", "No turn waits for a budget.", "muted"));
      pauses.replaceChildren(...cards);
    } catch (err) {
      onError(err);
    }
  }

  return { load };
}
