// Baseline: a bare aedes broker (in-memory persistence, no auth) on a TCP port.
import net from "node:net";
import { Aedes } from "aedes";
import MQEmitter from "mqemitter";
const port = Number(process.argv[2]);
const broker = await Aedes.createBroker({ mq: MQEmitter({ concurrency: 100 }) });
net.createServer(broker.handle).listen(port, "127.0.0.1");
