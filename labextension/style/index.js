import './base.css';
import './metrics.css';
import './health.css';
import './notify.css';
