"""Realistic example datasets, one per scenario of the design-pattern guides, with their access files.

Each scenario is generated deterministically (fixed seeds), written as mongoexport files plus an
access-pattern file, and states the recommendations it calls for. ``sample_configs/`` holds them as
written by :func:`write_scenario`; ``mongopat demo`` writes one of them to a folder of the user's.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bson import ObjectId, json_util

START = datetime.datetime(2026, 9, 1)


@dataclass
class Scenario:
    name: str
    database: str
    description: str
    collections: dict[str, list[dict[str, Any]]]
    access_yaml: str
    # (rule code, collection) pairs the scenario must produce; collections listed in ``healthy`` must not
    # produce any recommendation at all.
    expected: list[tuple[str, str]] = field(default_factory=list)
    healthy: list[str] = field(default_factory=list)


def _oid(rng: random.Random, when: datetime.datetime) -> ObjectId:
    seconds = int(when.replace(tzinfo=datetime.timezone.utc).timestamp())
    return ObjectId(seconds.to_bytes(4, "big") + rng.getrandbits(64).to_bytes(8, "big"))


def ecommerce() -> Scenario:
    rng = random.Random(101)
    customers = []
    for i in range(200):
        when = START + datetime.timedelta(hours=i * 3)
        customers.append({
            "_id": _oid(rng, when), "email": f"customer{i}@example.com", "name": f"Customer {i}",
            "address": {"city": rng.choice(["Lyon", "Porto", "Graz", "Turku", "Ghent"]), "zip": f"{rng.randint(1000, 99999)}"},
            "createdAt": when,
        })  # fmt: skip
    attributes: dict[str, dict[str, Callable[[], Any]]] = {
        "smartphones": {"screen_size": lambda: round(rng.uniform(5.4, 6.9), 1), "battery_mah": lambda: rng.randint(2800, 5500),
                        "camera_mp": lambda: rng.choice([12, 48, 50, 108])},
        "laptops": {"cpu": lambda: rng.choice(["i5", "i7", "M3", "Ryzen 7"]), "ram_gb": lambda: rng.choice([8, 16, 32]),
                    "storage_gb": lambda: rng.choice([256, 512, 1024])},
        "clothing": {"size": lambda: rng.choice(["S", "M", "L", "XL"]), "material": lambda: rng.choice(["cotton", "wool"]),
                     "color": lambda: rng.choice(["red", "black", "navy"])},
        "books": {"author": lambda: f"Author {rng.randint(1, 60)}", "pages": lambda: rng.randint(90, 900),
                  "isbn": lambda: f"978{rng.randint(10**9, 10**10 - 1)}"},
        "audio": {"driver_mm": lambda: rng.choice([10, 40, 50]), "impedance_ohm": lambda: rng.choice([16, 32, 250]),
                  "wireless": lambda: rng.random() < 0.5},
    }  # fmt: skip
    products = []
    for i in range(200):
        category = rng.choice(sorted(attributes))
        product = {
            "_id": f"prod{i:04d}",
            "name": f"Product {i}",
            "category": category,
            "price": round(rng.uniform(5, 1500), 2),
        }
        product.update({key: make() for key, make in attributes[category].items()})
        products.append(product)
    categories = [{"_id": "all", "name": "All", "parent": None}]
    for top in ("electronics", "fashion", "home", "books"):
        categories.append({"_id": top, "name": top.title(), "parent": "all"})
    for i in range(36):
        parent = rng.choice(categories[1:])["_id"]
        categories.append({"_id": f"cat{i:02d}", "name": f"Category {i}", "parent": parent})
    orders = []
    for i in range(800):
        when = START + datetime.timedelta(minutes=i * 71)
        count = rng.randint(250, 400) if i % 200 == 7 else rng.choice([1, 1, 2, 2, 3, 4, 5])
        items = []
        for _ in range(count):
            product = rng.choice(products)
            items.append(
                {
                    "productId": product["_id"],
                    "name": product["name"],
                    "price": product["price"],
                    "qty": rng.randint(1, 3),
                }
            )
        orders.append({"_id": _oid(rng, when), "customerId": rng.choice(customers)["_id"], "createdAt": when,
                       "status": rng.choice(["new", "paid", "shipped", "delivered"]), "items": items})  # fmt: skip
    access = """\
# E-commerce: orders with line items, customers, a catalog with varied specifications, a category tree.
version: 1
database: shop
collections:
  orders:
    writes: {inserts_per_sec: 2, updates_per_sec: 0.5}
    queries:
      - name: order_list                  # the customer's order history screen
        filter: {customerId: eq, createdAt: range}
        sort: {createdAt: -1}
        limit: 20
        fields: [createdAt, total, status]
        derive: {total: "sum(items.price * items.qty)"}
        per_sec: 300
      - name: with_customer               # order page header: who ordered
        lookup: {from: customers, local: customerId, foreign: _id, fields: [name, email], as: customer}
        per_sec: 150
  customers:
    writes: {inserts_per_sec: 0.2, updates_per_sec: "3/min"}
    queries:
      - {name: profile, filter: {_id: eq}, per_sec: 50}
  products:
    writes: {updates_per_sec: 0.5}
    queries:
      - name: search
        filter: {category: eq, screen_size: range, ram_gb: eq, color: eq}
        per_sec: 80
  categories:
    queries:
      - {name: subtree, filter: {ancestors: eq}, per_sec: 20}
"""
    return Scenario(
        "ecommerce", "shop", "orders with line items, customers, a catalog with sparse attributes, a category tree",
        {"customers": customers, "products": products, "categories": categories, "orders": orders}, access,
        expected=[("MP104", "orders"), ("MP102", "orders"), ("MP106", "orders"), ("MP107", "products"), ("MP111", "categories")],
        healthy=["customers"],
    )  # fmt: skip


def iot() -> Scenario:
    rng = random.Random(202)
    sensors = [{"_id": f"sensor-{i:02d}", "site": rng.choice(["north", "south"]), "model": "TH-2"} for i in range(20)]
    readings = []
    start = datetime.datetime(2026, 11, 20, 8, 0)
    for i in range(6000):
        when = start + datetime.timedelta(milliseconds=i * 100)
        readings.append({"_id": _oid(rng, when), "sensorId": sensors[i % 20]["_id"], "ts": when,
                         "temperature": round(rng.gauss(21, 2), 2), "humidity": round(rng.uniform(30, 60), 1)})  # fmt: skip
    access = """\
# IoT: twenty sensors reporting every two seconds each; dashboards read one sensor over a time range.
version: 1
database: iot
collections:
  readings:
    writes: {inserts_per_sec: 10}
    queries:
      - name: sensor_range
        filter: {sensorId: eq, ts: range}
        sort: {ts: 1}
        per_sec: 20
  sensors:
    queries:
      - {name: sensor, filter: {_id: eq}, per_sec: 5}
"""
    return Scenario("iot", "iot", "sensor readings at a high insert rate", {"sensors": sensors, "readings": readings},
                    access, expected=[("MP113", "readings")], healthy=["sensors"])  # fmt: skip


def social() -> Scenario:
    rng = random.Random(303)
    users = []
    for i in range(300):
        when = START + datetime.timedelta(hours=i)
        users.append({"_id": _oid(rng, when), "name": f"user{i}", "joinedAt": when})
    ids = [u["_id"] for u in users]
    for index, user in enumerate(users):
        count = rng.randint(1500, 3000) if index in (3, 150) else rng.randint(0, 40)
        user["followers"] = [ids[rng.randrange(len(ids))] for _ in range(count)]
    posts = []
    for i in range(500):
        when = START + datetime.timedelta(minutes=i * 37)
        posts.append({"_id": _oid(rng, when), "authorId": rng.choice(ids), "text": f"post {i}", "createdAt": when,
                      "likes": rng.randint(0, 50) if i % 97 else rng.randint(10**5, 10**6)})  # fmt: skip
    activities = []
    kinds = {
        "status_update": lambda: {"text": "Just got a new job!"},
        "photo_upload": lambda: {"photoUrl": f"https://img.example.com/{rng.randint(1, 10**6)}.jpg", "caption": "cat"},
        "like": lambda: {"targetId": rng.choice(posts)["_id"]},
        "follow": lambda: {"followeeId": rng.choice(ids)},
    }
    for i in range(800):
        when = START + datetime.timedelta(minutes=i * 23)
        kind = rng.choice(sorted(kinds))
        activities.append(
            {"_id": _oid(rng, when), "userId": rng.choice(ids), "timestamp": when, "type": kind, **kinds[kind]()}
        )
    access = """\
# Social: users with followers (a few celebrities), posts with hot like counters, a mixed activity feed.
version: 1
database: social
collections:
  users:
    writes: {inserts_per_sec: 1, updates_per_sec: 20}
    queries:
      - {name: profile, filter: {_id: eq}, per_sec: 400}
  posts:
    writes: {inserts_per_sec: 5}
    queries:
      - {name: timeline, filter: {authorId: in, createdAt: range}, sort: {createdAt: -1}, limit: 50, per_sec: 1200}
    counters:
      - {field: likes, increments_per_sec: 3000, exact: false}
  activities:
    writes: {inserts_per_sec: 30}
    queries:
      - {name: feed, filter: {userId: eq, timestamp: range}, sort: {timestamp: -1}, limit: 30, per_sec: 500}
"""
    return Scenario(
        "social", "social", "a social feed with celebrity accounts and hot counters",
        {"users": users, "posts": posts, "activities": activities}, access,
        expected=[("MP102", "users"), ("MP201", "users"), ("MP112", "posts"), ("MP108", "activities")],
    )  # fmt: skip


def crm() -> Scenario:
    rng = random.Random(404)
    companies = [{"_id": _oid(rng, START + datetime.timedelta(days=i)), "name": f"Company {i}",
                  "logo": f"https://cdn.example.com/logo{i}.png", "domain": f"company{i}.example"} for i in range(80)]  # fmt: skip
    contacts = [{"_id": _oid(rng, START + datetime.timedelta(hours=i)), "name": f"Contact {i}",
                 "email": f"contact{i}@example.com", "companyId": rng.choice(companies)["_id"]} for i in range(400)]  # fmt: skip
    accounts = [{"_id": _oid(rng, START + datetime.timedelta(hours=i * 7)), "name": f"Account {i}",
                 "industry": rng.choice(["retail", "energy", "health"]), "owner": f"rep{rng.randint(1, 9)}"} for i in range(100)]  # fmt: skip
    deals = []
    for i in range(1500):
        when = START + datetime.timedelta(minutes=i * 41)
        deals.append({"_id": _oid(rng, when), "accountId": rng.choice(accounts)["_id"], "amount": rng.randint(1, 500) * 100,
                      "status": rng.choice(["open", "open", "won", "lost"]), "closeDate": when + datetime.timedelta(days=30)})  # fmt: skip
    access = """\
# CRM: contacts shown with their company, account dashboards summing deals.
version: 1
database: crm
collections:
  contacts:
    writes: {inserts_per_sec: 0.5, updates_per_sec: 0.2}
    queries:
      - name: with_company
        lookup: {from: companies, local: companyId, foreign: _id, fields: [name, logo]}
        per_sec: 400
  companies:
    writes: {inserts_per_sec: "1/h", updates_per_sec: "2/h"}
  accounts:
    writes: {updates_per_sec: 0.1}
    queries:
      - name: dashboard
        filter: {_id: eq}
        aggregate: {from: deals, local: _id, foreign: accountId, compute: {total: {sum: amount}, open: {count: {status: open}}}}
        per_sec: 200
  deals:
    writes: {inserts_per_sec: 0.5, updates_per_sec: 1}
"""
    return Scenario(
        "crm", "crm", "contacts, companies, accounts and their deals",
        {"companies": companies, "contacts": contacts, "accounts": accounts, "deals": deals}, access,
        expected=[("MP106", "contacts"), ("MP105", "accounts"), ("MP206", "contacts"), ("MP206", "accounts"),
                  ("MP210", "deals")],  # the dashboard's join reads deals by accountId, which no index serves
        healthy=["companies"],
    )  # fmt: skip


def blog() -> Scenario:
    rng = random.Random(505)
    authors = [{"_id": f"author{i}", "name": f"Author {i}", "bio": "writes"} for i in range(30)]
    posts = []
    for i in range(150):
        when = START + datetime.timedelta(hours=i * 9)
        count = int(rng.paretovariate(1.2) * 20) if i % 10 else rng.randint(300, 450)
        comments = [{"author": f"reader{rng.randint(1, 500)}", "text": "Nice post!",
                     "createdAt": when + datetime.timedelta(minutes=j)} for j in range(min(count, 450))]  # fmt: skip
        posts.append({"_id": _oid(rng, when), "authorId": rng.choice(authors)["_id"], "title": f"Post {i}",
                      "body": "Lorem ipsum " * 10, "publishedAt": when, "comments": comments})  # fmt: skip
    access = """\
# Blog: post pages show the ten newest comments of ever-growing comment threads.
version: 1
database: blog
collections:
  posts:
    writes: {inserts_per_sec: "20/day", updates_per_sec: 2}
    queries:
      - name: post_page
        filter: {_id: eq}
        embed: {field: comments, sort: {createdAt: -1}, limit: 10}
        per_sec: 800
  authors:
    queries:
      - {name: author, filter: {_id: eq}, per_sec: 30}
"""
    return Scenario("blog", "blog", "posts with growing comment threads", {"authors": authors, "posts": posts}, access,
                    expected=[("MP103", "posts")], healthy=["authors"])  # fmt: skip


def wiki() -> Scenario:
    rng = random.Random(606)
    pages = []
    for i in range(200):
        when = START + datetime.timedelta(hours=i * 5)
        pages.append({"_id": _oid(rng, when), "title": f"Page {i}", "body": "Text " * rng.randint(20, 80),
                      "editor": f"editor{rng.randint(1, 20)}", "updatedAt": when})  # fmt: skip
    profiles = []
    for i in range(300):
        when = START + datetime.timedelta(hours=i * 6)
        if i < 180:
            profiles.append(
                {"_id": _oid(rng, when), "fullName": f"Person {i}", "phone": f"+33 6 {rng.randint(10**7, 10**8 - 1)}"}
            )
        else:
            profiles.append({"_id": _oid(rng, when), "firstName": "Person", "lastName": str(i),
                             "contact": {"phone": f"+33 6 {rng.randint(10**7, 10**8 - 1)}", "email": f"p{i}@example.com"}})  # fmt: skip
    access = """\
# Wiki: every edit of a page must be kept and restorable; user profiles changed shape last month.
version: 1
database: wiki
collections:
  pages:
    writes: {inserts_per_sec: "50/day", updates_per_sec: 5}
    queries:
      - {name: page, filter: {_id: eq}, per_sec: 300}
    history: {keep_versions: true, restore: true}
  profiles:
    writes: {inserts_per_sec: "100/day", updates_per_sec: "10/min"}
    queries:
      - {name: profile, filter: {_id: eq}, per_sec: 40}
"""
    return Scenario("wiki", "wiki", "pages with history, profiles whose shape changed", {"pages": pages, "profiles": profiles},
                    access, expected=[("MP110", "pages"), ("MP109", "profiles")])  # fmt: skip


def jobs() -> Scenario:
    rng = random.Random(707)
    companies = [{"_id": _oid(rng, START + datetime.timedelta(days=i)), "name": f"Employer {i}",
                  "logo": f"https://cdn.example.com/e{i}.png", "size": rng.choice(["small", "large"])} for i in range(50)]  # fmt: skip
    kinds = {
        "full_time": lambda: {"salary": rng.randint(40, 120) * 1000, "benefits": rng.choice(["health", "pension"])},
        "contract": lambda: {"hourlyRate": rng.randint(40, 150), "durationMonths": rng.choice([3, 6, 12])},
        "internship": lambda: {"stipend": rng.randint(600, 1500), "school": rng.choice(["any", "engineering"])},
    }
    jobs_ = []
    for i in range(400):
        when = START + datetime.timedelta(hours=i * 2)
        kind = rng.choice(sorted(kinds))
        jobs_.append({"_id": _oid(rng, when), "companyId": rng.choice(companies)["_id"], "title": f"Job {i}",
                      "postedAt": when, "type": kind, **kinds[kind]()})  # fmt: skip
    access = """\
# Job board: postings of several kinds, listed with their employer's name and logo.
version: 1
database: jobs
collections:
  jobs:
    writes: {inserts_per_sec: "200/day", updates_per_sec: "50/day"}
    queries:
      - {name: search, filter: {type: eq, postedAt: range}, sort: {postedAt: -1}, limit: 25, per_sec: 150}
      - name: with_company
        lookup: {from: companies, local: companyId, foreign: _id, fields: [name, logo]}
        per_sec: 150
  companies:
    writes: {updates_per_sec: "5/day"}
"""
    return Scenario(
        "jobs", "jobs", "job postings of several kinds with their employers",
        {"companies": companies, "jobs": jobs_}, access,
        expected=[("MP108", "jobs"), ("MP106", "jobs")], healthy=["companies"],
    )  # fmt: skip


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "ecommerce": ecommerce, "iot": iot, "social": social, "crm": crm, "blog": blog, "wiki": wiki, "jobs": jobs,
}  # fmt: skip


def write_scenario(scenario: Scenario, folder: Path) -> Path:
    """Write ``folder/<database>/<collection>.json`` (mongoexport, relaxed) and ``folder/access.yaml``.

    The data folder is named after the database, as mongodump does, so ``--dump folder`` finds it."""
    data = folder / scenario.database
    data.mkdir(parents=True, exist_ok=True)
    for name, documents in scenario.collections.items():
        with (data / f"{name}.json").open("w", encoding="utf-8") as handle:
            for document in documents:
                handle.write(json_util.dumps(document, json_options=json_util.RELAXED_JSON_OPTIONS) + "\n")
    (folder / "access.yaml").write_text(scenario.access_yaml, encoding="utf-8")
    return folder
