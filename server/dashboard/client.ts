// The dashboard's script, run in the browser: it polls /dashboard/data once a
// second and redraws; charts are SVG drawn here (no library). The function is
// serialised into the page (page.ts), so it uses nothing but browser globals
// and what it defines inside itself.
/* eslint-disable */
export function dashboardClient(): void {
  const SVG = 'http://www.w3.org/2000/svg';
  const HISTORY = 120;
  const history: { t: number; ttft50: number | null; ttft90: number | null; itl50: number | null; itl90: number | null; dps: number; queued: number }[] = [];
  let updates = 0;
  let token = sessionStorage.getItem('kvrouter-admin-token') ?? '';

  const $ = (id: string) => document.getElementById(id)!;
  function h(tag: string, attrs: Record<string, string | number> = {}, ...children: (Node | string)[]): HTMLElement {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    for (const c of children) e.append(c);
    return e;
  }
  function s(tag: string, attrs: Record<string, string | number> = {}, text?: string): SVGElement {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }
  const pct = (x: number | null) => (x === null ? '–' : `${(x * 100).toFixed(1)}%`);
  const ms = (x: number | null) => (x === null ? '–' : `${(x * 1000).toFixed(1)} ms`);
  // Relative to where the router serves the page, so a path prefix in front of it still works.
  const base = location.pathname.replace(/dashboard\/?$/, '');
  const headers = (): Record<string, string> => (token ? { authorization: `Bearer ${token}` } : {});

  /** Horizontal bars, one per row; `max` scales them (at least 1). */
  function bars(title: string, rows: { label: string; value: number; text: string; metric?: string }[], max?: number): SVGElement {
    const width = 360;
    const rowH = 18;
    const svg = s('svg', { class: 'chart bars', viewBox: `0 0 ${width} ${24 + rows.length * rowH}`, width: '100%' });
    svg.append(s('text', { x: 0, y: 14, class: 'title' }, title));
    const top = Math.max(max ?? 0, ...rows.map((r) => r.value), 1e-9);
    rows.forEach((r, i) => {
      const y = 22 + i * rowH;
      svg.append(s('text', { x: 0, y: y + 12, class: 'label' }, r.label));
      svg.append(s('rect', { x: 110, y, width: Math.max(0, (r.value / top) * 180), height: rowH - 4, class: 'bar' }));
      const value = s('text', { x: 296, y: y + 12, class: 'value' }, r.text);
      if (r.metric) value.setAttribute('data-metric', r.metric);
      svg.append(value);
    });
    return svg;
  }

  /** A line chart of the polled history. */
  function lines(title: string, series: { name: string; pick: (p: (typeof history)[number]) => number | null; cls: string }[], unit: (x: number) => string): SVGElement {
    const W = 360;
    const H = 140;
    const svg = s('svg', { class: 'chart lines', viewBox: `0 0 ${W} ${H}`, width: '100%', 'data-points': history.length });
    svg.append(s('text', { x: 0, y: 14, class: 'title' }, title));
    const values = history.flatMap((p) => series.map((x) => x.pick(p))).filter((v): v is number => v !== null);
    const top = Math.max(...values, 1e-9);
    const x = (i: number) => 40 + (i / Math.max(1, history.length - 1)) * (W - 50);
    const y = (v: number) => H - 16 - (v / top) * (H - 40);
    svg.append(s('text', { x: 0, y: 30, class: 'axis' }, unit(top)));
    svg.append(s('line', { x1: 40, y1: H - 16, x2: W - 10, y2: H - 16, class: 'axis-line' }));
    series.forEach((ser, k) => {
      const pts = history.map((p, i) => [i, ser.pick(p)] as const).filter(([, v]) => v !== null).map(([i, v]) => `${x(i).toFixed(1)},${y(v!).toFixed(1)}`);
      if (pts.length > 0) svg.append(s('polyline', { points: pts.join(' '), class: `line ${ser.cls}` }));
      svg.append(s('text', { x: 60 + k * 90, y: H - 2, class: `legend ${ser.cls}` }, ser.name));
    });
    return svg;
  }

  function render(data: any): void {
    // Percentiles do not add up across models: the trends follow the first one.
    const now = data.models[0];
    const queued = data.models.reduce((n: number, m: any) => n + m.queue.reduce((k: number, q: any) => k + q.requests, 0), 0);
    history.push({
      t: data.time,
      ttft50: now?.ttft_s.p50 ?? null,
      ttft90: now?.ttft_s.p90 ?? null,
      itl50: now?.itl_s.p50 ?? null,
      itl90: now?.itl_s.p90 ?? null,
      dps: data.models.reduce((n: number, m: any) => n + m.decisions_per_second, 0),
      queued,
    });
    if (history.length > HISTORY) history.shift();
    const sum = data.summary;
    $('summary').replaceChildren(
      ...(['mismatch', 'silent', 'stale', 'ok'] as const).map((v) => h('span', { class: `pill ${v}`, 'data-verdict-count': v }, `${v} ${sum[v]}`)),
    );
    const select = $('model') as HTMLSelectElement;
    const names = data.models.map((m: any) => m.model);
    if ([...select.options].map((o) => o.value).join('\n') !== names.join('\n')) {
      const chosen = select.value;
      select.replaceChildren(...names.map((n: string) => h('option', { value: n }, n)));
      if (names.includes(chosen)) select.value = chosen;
    }
    const models = $('models');
    models.replaceChildren();
    for (const m of data.models) {
      const section = h('section', { class: 'model', 'data-model': m.model });
      section.append(h('h2', {}, `${m.model}`, h('small', {}, ` block size ${m.block_size} · ${m.in_flight} in flight · ${m.decisions_per_second.toFixed(1)} decisions/s`)));
      const grid = h('div', { class: 'grid' });
      const ws = m.workers;
      const row = (pick: (w: any) => number, text: (w: any) => string, metric?: string) =>
        ws.map((w: any) => ({ label: w.worker, value: pick(w), text: text(w), metric: metric && `${metric}|${w.worker}` }));
      grid.append(
        h('div', { class: 'card' }, bars('active requests', row((w) => w.active_requests, (w) => String(w.active_requests), 'active_requests'))),
        h('div', { class: 'card' }, bars('prefill tokens queued', row((w) => w.prefill_tokens, (w) => String(w.prefill_tokens), 'prefill_tokens'))),
        h('div', { class: 'card' }, bars('decode blocks', row((w) => w.decode_blocks, (w) => String(w.decode_blocks), 'decode_blocks'))),
        h('div', { class: 'card' }, bars('cache blocks held', row((w) => w.blocks_held, (w) => String(w.blocks_held), 'blocks_held'))),
        h('div', { class: 'card' }, bars('hit rate (predicted, tokens)', row((w) => w.hit_rate.predicted.token ?? 0, (w) => pct(w.hit_rate.predicted.token), 'hit_rate_predicted'), 1)),
        h('div', { class: 'card' }, bars('hit rate (engine-reported, tokens)', row((w) => w.hit_rate.reported.token ?? 0, (w) => pct(w.hit_rate.reported.token), 'hit_rate_reported'), 1)),
        h('div', { class: 'card' }, bars('requests routed', row((w) => w.requests_routed, (w) => String(w.requests_routed), 'requests_routed'))),
        h(
          'div',
          { class: 'card' },
          bars(
            'queue depth / lanes per class',
            m.queue.map((q: any) => ({ label: q.policy_class, value: q.requests, text: `${q.requests} / ${q.lanes} lanes`, metric: `queue|${q.policy_class}` })),
          ),
        ),
      );
      section.append(grid);
      section.append(
        h('p', { class: 'numbers' }, `TTFT p50 ${ms(m.ttft_s.p50)} · p90 ${ms(m.ttft_s.p90)} · p99 ${ms(m.ttft_s.p99)} (${m.ttft_s.count}) — ITL p50 ${ms(m.itl_s.p50)} · p90 ${ms(m.itl_s.p90)} (${m.itl_s.count}) — hit rate predicted ${pct(m.hit_rate.predicted.token)} tokens / ${pct(m.hit_rate.predicted.request)} requests, reported ${pct(m.hit_rate.reported.token)} / ${pct(m.hit_rate.reported.request)}`),
      );
      models.append(section);
    }
    $('trends').replaceChildren(
      h('div', { class: 'card' }, lines(`TTFT (${now?.model ?? '–'})`, [{ name: 'p50', pick: (p) => p.ttft50, cls: 's1' }, { name: 'p90', pick: (p) => p.ttft90, cls: 's2' }], ms)),
      h('div', { class: 'card' }, lines(`inter-token latency (${now?.model ?? '–'})`, [{ name: 'p50', pick: (p) => p.itl50, cls: 's1' }, { name: 'p90', pick: (p) => p.itl90, cls: 's2' }], ms)),
      h('div', { class: 'card' }, lines('decisions per second', [{ name: 'decisions/s', pick: (p) => p.dps, cls: 's1' }], (x) => x.toFixed(1))),
      h('div', { class: 'card' }, lines('queued requests', [{ name: 'queued', pick: (p) => p.queued, cls: 's2' }], (x) => x.toFixed(0))),
    );
    const tbody = $('diagnostics');
    tbody.replaceChildren(
      ...data.diagnostics.map((d: any) =>
        h(
          'tr',
          { class: d.verdict, 'data-worker': d.worker },
          h('td', {}, d.worker),
          h('td', { class: 'verdict' }, d.verdict),
          h('td', {}, d.causes.length === 0 ? '' : h('div', {}, ...d.causes.map((c: any) => h('div', { class: 'cause', 'data-cause': c.cause }, h('b', {}, c.title), ` — ${c.detail}`, h('div', { class: 'fix' }, `Fix: ${c.fix}`))))),
          h('td', {}, `${d.events.stored}/${d.events.removed}/${d.events.cleared}`),
          h('td', {}, d.last_event_age_s === null ? 'never' : `${d.last_event_age_s.toFixed(1)} s`),
          h('td', {}, d.stream ? `${d.stream.gaps} gaps, ${d.stream.decodeErrors} decode errors` : '–'),
          h('td', {}, String(d.blocks_held)),
        ),
      ),
    );
    updates++;
    document.body.setAttribute('data-updates', String(updates));
  }

  async function poll(): Promise<void> {
    try {
      const r = await fetch(`${base}dashboard/data`, { headers: headers() });
      if (r.status === 401) {
        $('auth').hidden = false;
        $('status').textContent = 'the admin token is needed';
      } else if (r.ok) {
        $('auth').hidden = true;
        render(await r.json());
        $('status').textContent = `updated ${new Date().toLocaleTimeString()}`;
      } else {
        $('status').textContent = `the router answered ${r.status}`;
      }
    } catch (e) {
      $('status').textContent = `cannot reach the router: ${String(e)}`;
    }
    setTimeout(poll, 1000);
  }

  async function explain(): Promise<void> {
    const prompt = ($('prompt') as HTMLTextAreaElement).value;
    const model = ($('model') as HTMLSelectElement).value;
    const body = { model, messages: [{ role: 'user', content: prompt }] };
    const out = $('explain-out');
    const r = await fetch(`${base}router/explain`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers() }, body: JSON.stringify(body) });
    const x = await r.json();
    if (!r.ok) {
      out.replaceChildren(h('p', { class: 'error' }, x.error?.message ?? `the router answered ${r.status}`));
      return;
    }
    const costs = x.workers.map((w: any) => w.cost).filter((c: any) => typeof c === 'number');
    out.replaceChildren(
      h('p', {}, `${x.prompt_tokens} tokens, ${x.prompt_blocks} blocks; chosen: ${x.chosen ?? 'none'}${x.error ? ` (${x.error.message})` : ''}`),
      h('div', { class: 'grid' },
        h('div', { class: 'card' }, bars('overlap blocks', x.workers.map((w: any) => ({ label: w.worker, value: w.overlap_blocks, text: `${w.overlap_blocks} / ${x.prompt_blocks}`, metric: `overlap|${w.worker}` })), x.prompt_blocks)),
        h('div', { class: 'card' }, bars('cost (lower wins)', x.workers.map((w: any) => ({ label: w.worker, value: w.cost ?? 0, text: w.cost === null ? w.filtered ?? 'filtered' : w.cost.toFixed(3), metric: `cost|${w.worker}` })), Math.max(...costs, 1e-9))),
      ),
    );
  }

  $('explain-form').addEventListener('submit', (e) => {
    e.preventDefault();
    void explain();
  });
  $('auth').addEventListener('submit', (e) => {
    e.preventDefault();
    token = ($('token') as HTMLInputElement).value;
    sessionStorage.setItem('kvrouter-admin-token', token);
  });
  void poll();
}
