// Baseline for bench/analyze_vs_mongodb_schema.py: stream a mongoexport file through mongodb-schema
// (the analyzer MongoDB Compass uses), parsing each line as Extended JSON, and print a JSON summary.
const fs = require("fs");
const readline = require("readline");
const { EJSON } = require("bson");
const { SchemaAnalyzer } = require("mongodb-schema");

async function main() {
  const analyzer = new SchemaAnalyzer({ storeValues: true });
  const lines = readline.createInterface({ input: fs.createReadStream(process.argv[2]), crlfDelay: Infinity });
  let documents = 0;
  for await (const line of lines) {
    if (!line) continue;
    await analyzer.analyzeDoc(EJSON.parse(line, { relaxed: false }));
    documents++;
  }
  const schema = analyzer.getResult();
  console.log(JSON.stringify({ documents, fields: schema.fields.length }));
}

main();
