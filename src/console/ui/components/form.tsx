// A form of labelled fields: each field's problem is shown under it (and tied to it for screen
// readers), the server's refusal above the submit button.
import { useState } from "preact/hooks";
import { ErrorBox } from "./bits.tsx";

export interface Field {
  name: string; label: string;
  type?: "text" | "email" | "password" | "number" | "textarea" | "select" | "checkbox";
  options?: string[]; required?: boolean; placeholder?: string; value?: string;
  /** a problem with the value ("" : none), checked before the form is sent */
  check?: (v: string) => string;
}

export function Form({ id, fields, submit, onSubmit, cls }: {
  id: string; fields: Field[]; submit: string; cls?: string;
  /** sends the values; a thrown error is shown in the form */
  onSubmit: (values: Record<string, string>) => Promise<void>;
}) {
  const initial = () => Object.fromEntries(fields.map((f) => [f.name, f.value ?? (f.type === "select" ? f.options?.[0] ?? "" : "")]));
  const [values, setValues] = useState<Record<string, string>>(initial);
  const [problems, setProblems] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const set = (name: string, v: string) => setValues((o) => ({ ...o, [name]: v }));
  const send = async (e: Event) => {
    e.preventDefault();
    const found: Record<string, string> = {};
    for (const f of fields) {
      const v = values[f.name] ?? "";
      const p = f.required && !v.trim() ? `${f.label} is required` : f.check?.(v) ?? "";
      if (p) found[f.name] = p;
    }
    setProblems(found);
    if (Object.keys(found).length) return;
    setBusy(true);
    try { await onSubmit(values); setError(undefined); setValues(initial()); } catch (err) { setError(err); } finally { setBusy(false); }
  };
  return <form id={id} class={cls ?? "card form"} onSubmit={send} noValidate>
    {fields.map((f) => {
      const fid = `${id}-${f.name}`, problem = problems[f.name];
      const common = { id: fid, name: f.name, "aria-invalid": problem ? true : undefined, "aria-describedby": problem ? `${fid}-problem` : undefined };
      const input = f.type === "textarea"
        ? <textarea {...common} value={values[f.name]} placeholder={f.placeholder} rows={4} onInput={(e) => set(f.name, e.currentTarget.value)} />
        : f.type === "select"
          ? <select {...common} value={values[f.name]} onChange={(e) => set(f.name, e.currentTarget.value)}>{f.options!.map((o) => <option key={o} value={o}>{o}</option>)}</select>
          : f.type === "checkbox"
            ? <input {...common} type="checkbox" checked={values[f.name] === "true"} onChange={(e) => set(f.name, String(e.currentTarget.checked))} />
            : <input {...common} type={(f.type ?? "text") as "text"} value={values[f.name]} placeholder={f.placeholder} onInput={(e) => set(f.name, e.currentTarget.value)} />;
      return <div class="field" key={f.name}>
        <label for={fid}>{f.label}{f.required ? <span aria-hidden="true"> *</span> : null}</label>
        {input}
        {problem ? <span class="problem" id={`${fid}-problem`}>{problem}</span> : null}
      </div>;
    })}
    <ErrorBox error={error} />
    <button type="submit" class="primary" disabled={busy}>{submit}</button>
  </form>;
}
