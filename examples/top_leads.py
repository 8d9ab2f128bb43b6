# Pull all 10,000 leads from the CRM inside the sandbox and print only the five biggest.
from servers.crm import list_leads

leads = list_leads().json()["leads"]
top = sorted(leads, key=lambda lead: lead["estimated_value"], reverse=True)[:5]
print(f"{len(leads)} leads; the five biggest:")
for lead in top:
    print(f"  {lead['estimated_value']:>9,}  {lead['company']} ({lead['status']}, {lead['owner']})")
